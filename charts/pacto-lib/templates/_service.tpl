{{/*
The gRPC Service (only when the chart has a gRPC server), its headless twin `<fullname>-peers`
(replicated backends only) and the metrics Service.
*/}}
{{- define "pacto.service" -}}
{{- if eq (include "pacto.hasGrpcServer" .) "true" }}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "pacto.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "pacto.labels" . | nindent 4 }}
spec:
  type: ClusterIP
  selector:
    {{- include "pacto.selectorLabels" . | nindent 4 }}
  ports:
    - name: grpc
      port: {{ .Values.grpc.port }}
      targetPort: grpc
      protocol: TCP
      appProtocol: grpc
---
{{- if eq (include "pacto.replicated" .) "true" }}
# Headless: one DNS address per ready replica, so that the status-writer balances its calls over
# all of them (docs/design/scaling.md#replicas-and-client-side-balancing). A separate Service, as
# clusterIP cannot change on an existing one.
apiVersion: v1
kind: Service
metadata:
  name: {{ include "pacto.fullname" . }}-peers
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "pacto.labels" . | nindent 4 }}
spec:
  type: ClusterIP
  clusterIP: None
  publishNotReadyAddresses: false
  selector:
    {{- include "pacto.selectorLabels" . | nindent 4 }}
  ports:
    - name: grpc
      port: {{ .Values.grpc.port }}
      targetPort: grpc
      protocol: TCP
      appProtocol: grpc
---
{{- end }}
{{- end }}
{{- if .Values.metrics.service.enabled }}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "pacto.fullname" . }}-metrics
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "pacto.labels" . | nindent 4 }}
    pacto.trianalab.io/metrics: "true"
spec:
  type: ClusterIP
  selector:
    {{- include "pacto.selectorLabels" . | nindent 4 }}
  ports:
    - name: admin
      port: {{ .Values.metrics.service.port }}
      targetPort: admin
      protocol: TCP
      appProtocol: http
{{- end }}
{{- end }}
