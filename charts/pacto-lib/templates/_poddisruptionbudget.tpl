{{/*
The PodDisruptionBudget of a replicated backend (pacto.replicated): at most
podDisruptionBudget.maxUnavailable replicas evicted at once, so a drain never takes every replica.
Rendered only with more than one replica (with one, it would block every drain).
*/}}
{{- define "pacto.podDisruptionBudget" -}}
{{- if and (eq (include "pacto.replicated" .) "true") .Values.podDisruptionBudget.enabled (gt (int .Values.replicaCount) 1) }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "pacto.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "pacto.labels" . | nindent 4 }}
spec:
  maxUnavailable: {{ .Values.podDisruptionBudget.maxUnavailable }}
  selector:
    matchLabels:
      {{- include "pacto.selectorLabels" . | nindent 6 }}
{{- end }}
{{- end }}
