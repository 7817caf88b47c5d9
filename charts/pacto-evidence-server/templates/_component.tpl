{{/* The Evidence Server: HTTP ingestion in, OCI registries and the contract-resolver out. Its
names, labels, image, certificate and ServiceMonitor come from pacto-lib; its Deployment,
Services and NetworkPolicy are its own (an HTTP port, not gRPC). */}}

{{- define "pacto.component" -}}evidence-server{{- end }}

{{- define "pacto.alertPrefix" -}}PactoEvidenceServer{{- end }}

{{/* No gRPC server: its certificate is a client certificate for the contract-resolver. */}}
{{- define "pacto.hasGrpcServer" -}}false{{- end }}

{{- define "pacto.honorLabels" -}}false{{- end }}

{{/* No Kubernetes API access: no token is mounted and no Role exists. */}}
{{- define "pacto.needsKubernetes" -}}false{{- end }}

{{/* The contract-resolver's address: resolver.address, or its in-namespace Service. */}}
{{- define "pacto.evidence.resolverAddr" -}}
{{- default (printf "pacto-contract-resolver.%s.svc:%d" .Release.Namespace (int .Values.resolver.port)) .Values.resolver.address }}
{{- end }}

{{/* Name of the trust ConfigMap. */}}
{{- define "pacto.evidence.trustConfigMap" -}}
{{- default (printf "%s-trust" (include "pacto.fullname" .)) .Values.trust.existingConfigMap }}
{{- end }}

{{- define "pacto.alertRules" -}}
- alert: PactoEvidenceStoreRefusing
  expr: sum(increase(pacto_evidence_envelopes_refused_total{job="{{ .job }}",namespace="{{ .namespace }}",code=~"store_not_ready|registry_unavailable|registry_incomplete|store_degraded"}[10m])) > 0
  for: 10m
  labels:
    severity: warning
  annotations:
    summary: The Evidence Server refuses envelopes because of its registry.
    description: Envelopes are refused with a store code (store_not_ready, registry_unavailable, registry_incomplete, store_degraded); read the server's log and GET /api/evidence/v1/ready.
- alert: PactoEvidenceContractResolutionFailing
  expr: sum(increase(pacto_evidence_envelopes_refused_total{job="{{ .job }}",namespace="{{ .namespace }}",code="contract_resolution_failed"}[10m])) > 0
  for: 10m
  labels:
    severity: warning
  annotations:
    summary: The Evidence Server cannot resolve contracts through the contract-resolver.
    description: Check that the contract-resolver admits the evidence-server's identity (its grpc.allowedIdentities) and that the subjects' contracts exist.
{{- end }}
