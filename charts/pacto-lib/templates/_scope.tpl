{{/*
Namespace scope (status-writer, observer): the flags of controller.namespaceSelector and
controller.excludeNamespaces, and, with a selector, the cluster-wide right to list and watch
Namespaces that matching them needs (nothing else: no get, no write).
*/}}
{{- define "pacto.scopeArgs" -}}
{{- with .Values.controller.namespaceSelector }}
- --namespace-selector={{ . }}
{{- end }}
{{- with .Values.controller.excludeNamespaces }}
- --exclude-namespaces={{ join "," . }}
{{- end }}
{{- end }}

{{- define "pacto.scopeRbac" -}}
{{- if .Values.controller.namespaceSelector }}
{{- $fullname := include "pacto.fullname" . }}
---
{{- /* Matching --namespace-selector: which namespaces carry the labels. */}}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ $fullname }}-namespaces
  labels:
    {{- include "pacto.labels" . | nindent 4 }}
rules:
  - apiGroups: [""]
    resources: ["namespaces"]
    verbs: ["list", "watch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ $fullname }}-namespaces
  labels:
    {{- include "pacto.labels" . | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $fullname }}-namespaces
subjects:
  - kind: ServiceAccount
    name: {{ include "pacto.serviceAccountName" . }}
    namespace: {{ .Release.Namespace }}
{{- end }}
{{- end }}
