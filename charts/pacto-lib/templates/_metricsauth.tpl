{{/*
Secure metrics (docs/metrics.md#secure-metrics): the service checks each scrape's bearer token
with a TokenReview and the caller's right to GET /metrics with a SubjectAccessReview; this
ClusterRole grants those two creates and nothing else (the same as the built-in
system:auth-delegator, spelled out so that docs/rbac.md lists it). Cluster-scoped names are
shared by every release in the cluster: the release's namespace is part of the name.
*/}}
{{- define "pacto.metricsAuthRbac" -}}
{{- if eq (include "pacto.metricsSecure" .) "true" }}
{{- $name := printf "%s-%s-metrics-auth" (include "pacto.fullname" .) .Release.Namespace | trunc 63 | trimSuffix "-" }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ $name }}
  labels:
    {{- include "pacto.labels" . | nindent 4 }}
rules:
  - apiGroups: ["authentication.k8s.io"]
    resources: ["tokenreviews"]
    verbs: ["create"]
  - apiGroups: ["authorization.k8s.io"]
    resources: ["subjectaccessreviews"]
    verbs: ["create"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ $name }}
  labels:
    {{- include "pacto.labels" . | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $name }}
subjects:
  - kind: ServiceAccount
    name: {{ include "pacto.serviceAccountName" . }}
    namespace: {{ .Release.Namespace }}
{{- end }}
{{- end }}

{{/*
The ClusterRole a scraper's ServiceAccount is bound to (a ClusterRoleBinding of the user's):
GET on the non-resource URL /metrics, what every Pacto service's SubjectAccessReview asks.
One per cluster, rendered by the status-writer chart (metricsReader.create).
*/}}
{{- define "pacto.metricsReaderRole" -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ .Values.metricsReader.name }}
  labels:
    {{- include "pacto.labels" . | nindent 4 }}
rules:
  - nonResourceURLs: ["/metrics"]
    verbs: ["get"]
{{- end }}
