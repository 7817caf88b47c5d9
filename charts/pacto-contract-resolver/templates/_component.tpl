{{/* The contract resolver: OCI registries out, gRPC in; GET on pull Secrets only. */}}

{{- define "pacto.component" -}}contract-resolver{{- end }}

{{- define "pacto.alertPrefix" -}}PactoContractResolver{{- end }}

{{- define "pacto.hasGrpcServer" -}}true{{- end }}

{{/* Stateless: replicaCount replicas (2 by default), a PodDisruptionBudget, anti-affinity and the headless Service the status-writer balances over. */}}
{{- define "pacto.replicated" -}}true{{- end }}

{{- define "pacto.honorLabels" -}}false{{- end }}

{{- define "pacto.needsKubernetes" -}}true{{- end }}

{{/* Flags of services/contract-resolver (Args). */}}
{{- define "pacto.serviceArgs" -}}
- --listen-addr=0.0.0.0:{{ .Values.grpc.port }}
- --allowed-identities={{ include "pacto.allowedIdentities" . }}{{ if and .Values.evidenceServer.enabled (not .Values.grpc.allowedIdentities) }},{{ include "pacto.spiffeId" (dict "trustDomain" .Values.tls.trustDomain "namespace" .Release.Namespace "serviceAccount" .Values.evidenceServer.serviceAccount) }}{{ end }}
{{- with .Values.insecureRegistries }}
- --insecure-registries={{ join "," . }}
{{- end }}
- --registry-connect-timeout={{ .Values.registry.connectTimeout }}
- --registry-timeout={{ .Values.registry.timeout }}
- --registry-max-retries={{ .Values.registry.maxRetries }}
- --tags-cache-ttl={{ .Values.cache.tagsTtl }}
- --bundle-cache-ttl={{ .Values.cache.bundleTtl }}
- --bundle-cache-size={{ .Values.cache.bundleSize }}
- --failure-cache-ttl={{ .Values.cache.failureTtl }}
- --max-bundle-bytes={{ int64 .Values.limits.maxBundleBytes }}
- --max-inline-bytes={{ int64 .Values.limits.maxInlineBytes }}
{{- /* The resolver sizes its bundle cache, pulls and validations to fit the container's memory
limit (docs/design/resolution.md#memory). */}}
{{- with (.Values.resources.limits | default dict).memory }}
- --memory-limit={{ . }}
{{- end }}
{{- end }}

{{/* The status-writer calls Resolve / ListRevisions; the Evidence Server calls Resolve when
evidenceServer.enabled. */}}
{{- define "pacto.grpcIngressFrom" -}}
- podSelector:
    matchLabels:
      {{- include "pacto.peerSelector" "status-writer" | nindent 6 }}
{{- if .Values.evidenceServer.enabled }}
- podSelector:
    matchLabels:
      {{- include "pacto.peerSelector" "evidence-server" | nindent 6 }}
{{- end }}
{{- end }}

{{/* OCI registries. */}}
{{- define "pacto.egressRules" -}}
- to:
    {{- range .Values.registry.egress.cidrs }}
    - ipBlock:
        cidr: {{ . }}
    {{- end }}
  ports:
    {{- range .Values.registry.egress.ports }}
    - port: {{ . }}
      protocol: TCP
    {{- end }}
{{- end }}

{{- define "pacto.alertRules" -}}
- alert: PactoContractsUnavailable
  expr: sum(rate(pacto_resolver_resolves_total{job="{{ .job }}",namespace="{{ .namespace }}",outcome="unavailable"}[15m])) > 0
  for: 15m
  labels:
    severity: warning
  annotations:
    summary: Contracts cannot be obtained from their registries.
    description: Resolves end Unavailable (registry unreachable, auth rejected, tag missing); the Pactos read ContractValid Unknown/Unavailable. See "Contract not resolving" in docs/troubleshooting.md.
- alert: PactoPullSecretReadErrors
  expr: increase(pacto_resolver_secret_reads_total{job="{{ .job }}",namespace="{{ .namespace }}",result="error"}[15m]) > 0
  labels:
    severity: warning
  annotations:
    summary: Pull secrets referenced by Pactos cannot be read.
    description: The Secret is missing, malformed or the resolver lacks GET on it (RBAC).
- alert: PactoContractResolverUnauthorizedCalls
  expr: increase(pacto_grpc_server_unauthorized_total{job="{{ .job }}",namespace="{{ .namespace }}"}[10m]) > 0
  labels:
    severity: warning
  annotations:
    summary: A client with a certificate not on the resolver's allow-list called it.
    description: Check grpc.allowedIdentities against the caller's certificate SANs.
{{- end }}

{{/* No volumes beyond the shared ones. */}}
{{- define "pacto.extraVolumeMounts" -}}
{{- end }}

{{- define "pacto.extraVolumes" -}}
{{- end }}
