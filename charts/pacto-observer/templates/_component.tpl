{{/* The observer: reads the cluster, answers Observe/WatchTargets, receives node-agent streams. */}}

{{- define "pacto.component" -}}observer{{- end }}

{{- define "pacto.alertPrefix" -}}PactoObserver{{- end }}

{{- define "pacto.hasGrpcServer" -}}true{{- end }}

{{/* Stateless: replicaCount replicas (2 by default), a PodDisruptionBudget, anti-affinity and the headless Service the status-writer balances over. */}}
{{- define "pacto.replicated" -}}true{{- end }}

{{- define "pacto.honorLabels" -}}false{{- end }}

{{- define "pacto.needsKubernetes" -}}true{{- end }}

{{/* Flags of services/observer (Args). */}}
{{- define "pacto.serviceArgs" -}}
- --listen-addr=0.0.0.0:{{ .Values.grpc.port }}
- --allowed-identities={{ include "pacto.allowedIdentities" . }}
{{- with .Values.controller.watchNamespace }}
- --watch-namespace={{ . }}
{{- end }}
{{- include "pacto.scopeArgs" . }}
{{- with .Values.controller.stabilizationWindow }}
- --stabilization-window={{ . }}
{{- end }}
{{- if .Values.controller.enableProbing }}
- --enable-probing
{{- end }}
{{- if .Values.controller.enableMetricsObservation }}
- --enable-metrics-observation
{{- end }}
{{- if .Values.controller.interfaceNameMatchDiscovery }}
- --interface-name-match-discovery
{{- end }}
{{- if .Values.rbac.secretMetadata }}
- --observe-secrets
{{- end }}
{{- if .Values.nodeAgent.enabled }}
{{- if .Values.nodeAgent.identities }}
- --node-agent-identities={{ join "," .Values.nodeAgent.identities }}
{{- else }}
- --node-agent-identities={{ include "pacto.spiffeId" (dict "trustDomain" .Values.tls.trustDomain "namespace" .Values.nodeAgent.namespace "serviceAccount" .Values.nodeAgent.serviceAccount) }}
{{- end }}
- --node-agent-namespace={{ .Values.nodeAgent.namespace }}
- --node-agent-service-account={{ .Values.nodeAgent.serviceAccount }}
- --node-agent-daemonset={{ .Values.nodeAgent.daemonSet }}
- --node-agent-token-audience={{ .Values.nodeAgent.tokenAudience }}
- --node-evidence
{{- with .Values.nodeAgent.staleAfter }}
- --node-evidence-stale-after={{ . }}
{{- end }}
{{- end }}
{{- end }}

{{/* The status-writer calls Observe/WatchTargets; node agents stream their reports. */}}
{{- define "pacto.grpcIngressFrom" -}}
- podSelector:
    matchLabels:
      {{- include "pacto.peerSelector" "status-writer" | nindent 6 }}
{{- if .Values.nodeAgent.enabled }}
- namespaceSelector:
    matchLabels:
      kubernetes.io/metadata.name: {{ .Values.nodeAgent.namespace }}
  podSelector:
    matchLabels:
      {{- include "pacto.peerSelector" "node-agent" | nindent 6 }}
{{- end }}
{{- end }}

{{/* Active probes and metrics scrapes go to the target pods, in any namespace. */}}
{{- define "pacto.egressRules" -}}
{{- if or .Values.controller.enableProbing .Values.controller.enableMetricsObservation }}
- to:
    - namespaceSelector: {}
{{- end }}
{{- end }}

{{- define "pacto.alertRules" -}}
- alert: PactoObserverApiErrors
  expr: sum(rate(pacto_observer_api_errors_total{job="{{ .job }}",namespace="{{ .namespace }}"}[10m])) > 0
  for: 15m
  labels:
    severity: warning
  annotations:
    summary: Kubernetes API queries of the observer are failing.
    description: Findings read COLLECTION_FAILED and RuntimeObserved is False; Forbidden errors mean the observer's ClusterRole is missing (see "Operator RBAC errors" in docs/troubleshooting.md).
- alert: PactoObserverUnauthorizedCalls
  expr: increase(pacto_grpc_server_unauthorized_total{job="{{ .job }}",namespace="{{ .namespace }}"}[10m]) > 0
  labels:
    severity: warning
  annotations:
    summary: A client with a certificate not on the observer's allow-lists called it.
    description: Check grpc.allowedIdentities against the caller's certificate SANs.
{{- end }}

{{/* No volumes beyond the shared ones. */}}
{{- define "pacto.extraVolumeMounts" -}}
{{- end }}

{{- define "pacto.extraVolumes" -}}
{{- end }}
