{{/*
The node agent takes its names and labels from the library chart pacto-lib (pacto.fullname,
pacto.labels, pacto.selectorLabels) and its metrics Service, ServiceMonitor and metrics RBAC
from the library's templates; these are the hooks those need.
*/}}

{{- define "pacto.component" -}}node-agent{{- end }}

{{- define "pacto.honorLabels" -}}false{{- end }}

{{/*
The observer's certificate name (--observer-server-name): observerServerName, else the host of
observerAddress without the `-peers` suffix of its first label (the headless Service's name maps
to the Service name on the certificate); empty (no flag: the host itself) otherwise.
*/}}
{{- define "pacto-node-agent.observerServerName" -}}
{{- if .Values.observerServerName -}}
{{- .Values.observerServerName -}}
{{- else -}}
{{- $labels := splitList "." (first (splitList ":" .Values.observerAddress)) -}}
{{- $head := first $labels -}}
{{- if hasSuffix "-peers" $head -}}
{{- join "." (prepend (rest $labels) (trimSuffix "-peers" $head)) -}}
{{- end -}}
{{- end -}}
{{- end }}
