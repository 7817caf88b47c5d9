{{/*
The service's ServiceAccount (token mounted only when pacto.apiAccess is true).
*/}}
{{- define "pacto.serviceAccount" -}}
{{- if .Values.serviceAccount.create }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "pacto.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "pacto.labels" . | nindent 4 }}
  {{- with .Values.serviceAccount.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
automountServiceAccountToken: {{ include "pacto.apiAccess" . }}
{{- end }}
{{- end }}
