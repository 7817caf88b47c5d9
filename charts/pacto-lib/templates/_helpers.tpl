{{/*
Helpers of the Pacto service charts: names, labels, image, TLS and the flags every service shares.
What differs per service comes from the hooks each chart defines in its own _component.tpl
(see this chart's README.md).
*/}}

{{- define "pacto.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "pacto.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "pacto.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pacto.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: {{ include "pacto.component" . }}
{{- end }}

{{- define "pacto.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "pacto.selectorLabels" . }}
app.kubernetes.io/part-of: pacto
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "pacto.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "pacto.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "pacto.image" -}}
{{- include "pacto.imageRef" (dict "image" .Values.image "repository" (printf "ghcr.io/trianalab/pacto-operator-rs/%s" (include "pacto.component" .)) "appVersion" .Chart.AppVersion) }}
{{- end }}

{{/*
An image reference from an `image:` values block (dict: image, repository = the default
repository, appVersion): `repository@digest` when image.digest is set (the tag is then ignored:
a digest names exactly the pushed image, docs/images.md), else `repository:tag`.
*/}}
{{- define "pacto.imageRef" -}}
{{- $repository := default .repository .image.repository }}
{{- if .image.digest }}
{{- printf "%s@%s" $repository .image.digest }}
{{- else }}
{{- printf "%s:%s" $repository (default .appVersion .image.tag) }}
{{- end }}
{{- end }}

{{/* This service's DNS name (first DNS SAN of its certificate; the server name its clients check). */}}
{{- define "pacto.identity" -}}
{{- default (printf "%s.pacto.svc" (include "pacto.component" .)) .Values.tls.identity }}
{{- end }}

{{/* The identity of a ServiceAccount under the trust domain (docs/design/identity.md):
spiffe://<trustDomain>/ns/<namespace>/sa/<serviceAccount>. Argument: a dict with those keys. */}}
{{- define "pacto.spiffeId" -}}
{{- printf "spiffe://%s/ns/%s/sa/%s" .trustDomain .namespace .serviceAccount }}
{{- end }}

{{/* This service's identity: the URI SAN of its certificate, from its ServiceAccount. */}}
{{- define "pacto.uriIdentity" -}}
{{- include "pacto.spiffeId" (dict "trustDomain" .Values.tls.trustDomain "namespace" .Release.Namespace "serviceAccount" (include "pacto.serviceAccountName" .)) }}
{{- end }}

{{/* The --allowed-identities of a gRPC server: grpc.allowedIdentities, or when empty the
status-writer's URI identity in this release's namespace (ServiceAccount pacto-status-writer). */}}
{{- define "pacto.allowedIdentities" -}}
{{- if .Values.grpc.allowedIdentities }}
{{- join "," .Values.grpc.allowedIdentities }}
{{- else }}
{{- include "pacto.spiffeId" (dict "trustDomain" .Values.tls.trustDomain "namespace" .Release.Namespace "serviceAccount" "pacto-status-writer") }}
{{- end }}
{{- end }}

{{/* Name of the Secret holding tls.crt, tls.key and ca.crt. */}}
{{- define "pacto.tlsSecretName" -}}
{{- if eq .Values.tls.mode "existing-secret" }}
{{- required "tls.existingSecret is required when tls.mode is existing-secret" .Values.tls.existingSecret }}
{{- else }}
{{- printf "%s-tls" (include "pacto.fullname" .) }}
{{- end }}
{{- end }}

{{/* Pod selector of another Pacto service, by component (same labels every chart sets). */}}
{{- define "pacto.peerSelector" -}}
app.kubernetes.io/part-of: pacto
app.kubernetes.io/component: {{ . }}
{{- end }}

{{/* Flags every service shares (services/runtime/src/args.rs). */}}
{{- define "pacto.commonArgs" -}}
- --admin-addr=0.0.0.0:{{ .Values.admin.port }}
- --log-level={{ .Values.logging.level }}
- --log-format={{ .Values.logging.format }}
{{- if eq .Values.tls.mode "insecure" }}
- --insecure
{{- else }}
- --tls-ca=/etc/pacto/tls/{{ .Values.tls.keys.ca }}
- --tls-cert=/etc/pacto/tls/{{ .Values.tls.keys.cert }}
- --tls-key=/etc/pacto/tls/{{ .Values.tls.keys.key }}
- --tls-reload-interval={{ .Values.tls.reloadInterval }}
{{- end }}
{{- include "pacto.metricsArgs" . }}
{{- end }}

{{/*
"true" when /metrics is served securely (docs/metrics.md#secure-metrics): metrics.secure and a
certificate to serve it with (tls.mode cert-manager or existing-secret). With tls.mode insecure
the flag is never rendered: the service refuses --metrics-secure with --insecure.
*/}}
{{- define "pacto.metricsSecure" -}}
{{- if and .Values.metrics.secure (ne .Values.tls.mode "insecure") }}true{{ else }}false{{ end }}
{{- end }}

{{/* The secure metrics flags (rendered only when pacto.metricsSecure: the flag is a switch). */}}
{{- define "pacto.metricsArgs" -}}
{{- if eq (include "pacto.metricsSecure" .) "true" }}
- --metrics-secure
- --metrics-addr=0.0.0.0:{{ .Values.metrics.securePort }}
{{- end }}
{{- end }}

{{/*
"true" when the pod talks to the Kubernetes API: the service's own needs (pacto.needsKubernetes)
or, with secure metrics, the TokenReview and SubjectAccessReview of each scrape. Decides the
token mount and the NetworkPolicy's DNS and API server egress.
*/}}
{{- define "pacto.apiAccess" -}}
{{- if or (eq (include "pacto.needsKubernetes" .) "true") (eq (include "pacto.metricsSecure" .) "true") }}true{{ else }}false{{ end }}
{{- end }}

{{/* The certificate serves TLS: a gRPC server, or the secure metrics listener. */}}
{{- define "pacto.servesTls" -}}
{{- if or (eq (include "pacto.hasGrpcServer" .) "true") (eq (include "pacto.metricsSecure" .) "true") }}true{{ else }}false{{ end }}
{{- end }}

{{/* DNS names of this service's certificate: its identity first, then the Service names. */}}
{{- define "pacto.certDnsNames" -}}
- {{ include "pacto.identity" . | quote }}
{{- if eq (include "pacto.hasGrpcServer" .) "true" }}
{{- $fullname := include "pacto.fullname" . }}
- {{ $fullname }}
- {{ printf "%s.%s" $fullname .Release.Namespace }}
- {{ printf "%s.%s.svc" $fullname .Release.Namespace }}
- {{ printf "%s.%s.svc.%s" $fullname .Release.Namespace .Values.clusterDomain }}
{{- end }}
{{- range .Values.tls.extraDnsNames }}
- {{ . | quote }}
{{- end }}
{{- end }}
