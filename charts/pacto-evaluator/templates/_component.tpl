{{/* The evaluator: pure Evaluate over gRPC; no Kubernetes access, no egress at all. */}}

{{- define "pacto.component" -}}evaluator{{- end }}

{{- define "pacto.alertPrefix" -}}PactoEvaluator{{- end }}

{{- define "pacto.hasGrpcServer" -}}true{{- end }}

{{/* Stateless: replicaCount replicas (2 by default), a PodDisruptionBudget, anti-affinity and the headless Service the status-writer balances over. */}}
{{- define "pacto.replicated" -}}true{{- end }}

{{- define "pacto.honorLabels" -}}false{{- end }}

{{/* No Kubernetes API access: no token is mounted and no Role exists. */}}
{{- define "pacto.needsKubernetes" -}}false{{- end }}

{{/* Flags of services/evaluator (Args). */}}
{{- define "pacto.serviceArgs" -}}
- --listen-addr=0.0.0.0:{{ .Values.grpc.port }}
- --allowed-identities={{ include "pacto.allowedIdentities" . }}
- --contract-cache-entries={{ int64 .Values.contractCacheEntries }}
{{- end }}

{{/* Only the status-writer calls Evaluate. */}}
{{- define "pacto.grpcIngressFrom" -}}
- podSelector:
    matchLabels:
      {{- include "pacto.peerSelector" "status-writer" | nindent 6 }}
{{- end }}

{{/* The evaluator does no I/O besides its gRPC and admin ports. */}}
{{- define "pacto.egressRules" -}}
{{- end }}

{{- define "pacto.alertRules" -}}
- alert: PactoEvaluatorErrors
  expr: sum(rate(pacto_grpc_server_errors_total{job="{{ .job }}",namespace="{{ .namespace }}",code=~"INTERNAL|UNKNOWN|DATA_LOSS"}[5m])) > 0
  for: 10m
  labels:
    severity: warning
  annotations:
    summary: Evaluate calls are failing with internal errors.
    description: The evaluator answered INTERNAL/UNKNOWN/DATA_LOSS for 10 minutes; read its logs.
- alert: PactoEvaluatorUnauthorizedCalls
  expr: increase(pacto_grpc_server_unauthorized_total{job="{{ .job }}",namespace="{{ .namespace }}"}[10m]) > 0
  labels:
    severity: warning
  annotations:
    summary: A client with a certificate not on the evaluator's allow-list called it.
    description: Check grpc.allowedIdentities against the caller's certificate SANs (see docs/configuration.md, mTLS identities).
- alert: PactoEvaluatorTlsHandshakeFailures
  expr: increase(pacto_tls_handshake_failures_total{job="{{ .job }}",namespace="{{ .namespace }}"}[10m]) > 5
  labels:
    severity: warning
  annotations:
    summary: TLS handshakes to the evaluator are failing.
    description: Clients present no certificate or one from another CA; check that every service uses the same issuer.
{{- end }}

{{/* No volumes beyond the shared ones. */}}
{{- define "pacto.extraVolumeMounts" -}}
{{- end }}

{{- define "pacto.extraVolumes" -}}
{{- end }}
