{{/*
The node agent takes its names and labels from the library chart pacto-lib (pacto.fullname,
pacto.labels, pacto.selectorLabels); this is the one hook those need.
*/}}

{{- define "pacto.component" -}}node-agent{{- end }}
