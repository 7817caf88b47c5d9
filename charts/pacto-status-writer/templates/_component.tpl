{{/* The status-writer: reconcile hub; a gRPC client of the other three, no gRPC server. */}}

{{- define "pacto.component" -}}status-writer{{- end }}

{{- define "pacto.alertPrefix" -}}PactoStatusWriter{{- end }}

{{- define "pacto.hasGrpcServer" -}}false{{- end }}

{{/* The single writer under its Lease: no PodDisruptionBudget, anti-affinity or headless Service. */}}
{{- define "pacto.replicated" -}}false{{- end }}

{{- define "pacto.needsKubernetes" -}}true{{- end }}

{{/*
A backend's flags: by default the headless Service pacto-<name>-peers (one address per ready
replica, balanced client-side) with the server name of the ClusterIP Service the certificate
carries (docs/design/scaling.md#replicas-and-client-side-balancing); a set address is used as it
is, its host being the server name.
*/}}
{{- define "pacto.backendArgs" -}}
{{- $ctx := index . 0 }}{{- $flag := index . 1 }}{{- $name := index . 2 }}{{- $value := index . 3 }}
{{- if $value }}
- --{{ $flag }}-addr={{ $value }}
{{- else }}
- --{{ $flag }}-addr={{ printf "pacto-%s-peers.%s.svc:%v" $name $ctx.Release.Namespace $ctx.Values.backends.port }}
- --{{ $flag }}-server-name={{ printf "pacto-%s.%s.svc" $name $ctx.Release.Namespace }}
{{- end }}
{{- end }}

{{/* Flags of services/status-writer (Args). */}}
{{- define "pacto.serviceArgs" -}}
{{- include "pacto.backendArgs" (list . "resolver" "contract-resolver" .Values.backends.resolver) }}
{{- include "pacto.backendArgs" (list . "observer" "observer" .Values.backends.observer) }}
{{- include "pacto.backendArgs" (list . "evaluator" "evaluator" .Values.backends.evaluator) }}
{{- with .Values.controller.watchNamespace }}
- --watch-namespace={{ . }}
{{- end }}
{{- include "pacto.scopeArgs" . }}
{{- with .Values.controller.stabilizationWindow }}
- --stabilization-window={{ . }}
{{- end }}
- --grpc-connect-timeout={{ .Values.grpcClient.connectTimeout }}
- --grpc-request-timeout={{ .Values.grpcClient.requestTimeout }}
- --grpc-max-retries={{ .Values.grpcClient.maxRetries }}
- --backend-resolve-interval={{ .Values.grpcClient.resolveInterval }}
- --backend-ejection={{ .Values.grpcClient.ejection }}
{{- with .Values.controller.revisionMirrorInterval }}
- --revision-mirror-interval={{ . }}
{{- end }}
{{- with .Values.controller.maxConcurrentReconciles }}
- --max-concurrent-reconciles={{ . }}
{{- end }}
{{- with .Values.evidence }}{{- if .url }}
- --evidence-url={{ .url }}
- --evidence-key=/etc/pacto/evidence/{{ required "evidence.keyFile is required with evidence.url" .keyFile }}
{{- with .keyId }}
- --evidence-key-id={{ . }}
{{- end }}
- --evidence-producer={{ .producer }}
{{- with .queueSize }}
- --evidence-queue-size={{ . }}
{{- end }}
{{- end }}{{- end }}
{{- if (.Values.policyReports).enabled }}
- --policy-reports
{{- end }}
{{- if .Values.nodeAgent.enabled }}
- --node-agent-namespace={{ .Values.nodeAgent.namespace }}
{{- with .Values.nodeAgent.staleAfter }}
- --node-evidence-stale-after={{ . }}
{{- end }}
{{- end }}
{{- if .Values.leaderElection.enabled }}
- --leader-elect
- --leader-election-id={{ .Values.leaderElection.leaseName }}
{{- with .Values.leaderElection.leaseDuration }}
- --leader-election-lease-duration={{ . }}
{{- end }}
{{- with .Values.leaderElection.renewDeadline }}
- --leader-election-renew-deadline={{ . }}
{{- end }}
{{- with .Values.leaderElection.retryPeriod }}
- --leader-election-retry-period={{ . }}
{{- end }}
{{- end }}
{{- end }}

{{- define "pacto.grpcIngressFrom" -}}
{{- end }}

{{/* Producer mode: the private key Secret, read-only, readable by the pod's group only. */}}
{{- define "pacto.extraVolumeMounts" -}}
{{- if .Values.evidence.url }}
- name: evidence-key
  mountPath: /etc/pacto/evidence
  readOnly: true
{{- end }}
{{- end }}

{{- define "pacto.extraVolumes" -}}
{{- if .Values.evidence.url }}
- name: evidence-key
  secret:
    secretName: {{ required "evidence.keySecret is required with evidence.url" .Values.evidence.keySecret }}
    defaultMode: 0440
    items:
      - key: {{ .Values.evidence.keyFile }}
        path: {{ .Values.evidence.keyFile }}
{{- end }}
{{- end }}

{{/* gRPC to the resolver, the observer and the evaluator (same namespace). */}}
{{- define "pacto.egressRules" -}}
- to:
    {{- range list "contract-resolver" "observer" "evaluator" }}
    - podSelector:
        matchLabels:
          {{- include "pacto.peerSelector" . | nindent 10 }}
    {{- end }}
  ports:
    - port: {{ .Values.backends.port }}
      protocol: TCP
{{- if .Values.evidence.url }}
{{- /* Producer mode: the Evidence Server. */}}
- to:
    {{- toYaml .Values.evidence.networkPolicy.to | nindent 4 }}
  ports:
    - port: {{ .Values.evidence.networkPolicy.port }}
      protocol: TCP
{{- end }}
{{- end }}

{{/* The Pacto gauges carry their own namespace label: keep it (honorLabels). */}}
{{- define "pacto.honorLabels" -}}true{{- end }}

{{- define "pacto.alertRules" -}}
- alert: PactoContractNonCompliant
  expr: max by (namespace, name) (pacto_contract_status{job="{{ .job }}",status="NonCompliant"}) == 1
  for: 15m
  labels:
    severity: warning
  annotations:
    summary: "Pacto {{`{{ $labels.namespace }}/{{ $labels.name }}`}} is NonCompliant."
    description: "At least one confirmed violation; run kubectl describe pacto {{`{{ $labels.name }}`}} -n {{`{{ $labels.namespace }}`}}."
- alert: PactoContractInvalid
  expr: max by (namespace, name) (pacto_contract_status{job="{{ .job }}",status="Invalid"}) == 1
  for: 15m
  labels:
    severity: warning
  annotations:
    summary: "Pacto {{`{{ $labels.namespace }}/{{ $labels.name }}`}} has an invalid contract."
    description: "status.validation names the errors; reproduce it with pacto validate."
- alert: PactoReadinessGateUnmet
  expr: max by (namespace, name) (pacto_readiness_gate{job="{{ .job }}"}) == 0
  for: 30m
  labels:
    severity: info
  annotations:
    summary: "Pacto {{`{{ $labels.namespace }}/{{ $labels.name }}`}} does not meet its readiness gate."
    description: "The ReadinessSatisfied condition breaks the score down by claim status."
{{- end }}
