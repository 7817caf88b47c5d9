{{/*
The service's Deployment; the per-service flags come from the chart's pacto.serviceArgs.
*/}}
{{- define "pacto.deployment" -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  {{- /* A chart may name its Deployment apart from its other objects (the status-writer's is
  the operator's, deploy/pacto-operator); selectors use labels, never this name. */}}
  name: {{ .Values.deploymentName | default (include "pacto.fullname" .) }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "pacto.labels" . | nindent 4 }}
spec:
  replicas: {{ .Values.replicaCount }}
  revisionHistoryLimit: 5
  selector:
    matchLabels:
      {{- include "pacto.selectorLabels" . | nindent 6 }}
  template:
    metadata:
      annotations:
        {{- with .Values.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        kubectl.kubernetes.io/default-container: {{ include "pacto.component" . }}
      labels:
        {{- include "pacto.labels" . | nindent 8 }}
        {{- with .Values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ include "pacto.serviceAccountName" . }}
      automountServiceAccountToken: {{ include "pacto.apiAccess" . }}
      enableServiceLinks: false
      {{- with .Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      securityContext:
        {{- toYaml .Values.podSecurityContext | nindent 8 }}
      terminationGracePeriodSeconds: {{ .Values.terminationGracePeriodSeconds }}
      containers:
        - name: {{ include "pacto.component" . }}
          image: {{ include "pacto.image" . | quote }}
          imagePullPolicy: {{ .Values.image.pullPolicy }}
          {{- if and (eq (include "pacto.hasGrpcServer" .) "true") (gt (int .Values.shutdownDelaySeconds) 0) }}
          lifecycle:
            preStop:
              sleep:
                seconds: {{ int .Values.shutdownDelaySeconds }}
          {{- end }}
          args:
            {{- include "pacto.serviceArgs" . | nindent 12 }}
            {{- include "pacto.commonArgs" . | nindent 12 }}
            {{- with .Values.extraArgs }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          env:
            - name: POD_NAME
              valueFrom:
                fieldRef:
                  fieldPath: metadata.name
            - name: POD_NAMESPACE
              valueFrom:
                fieldRef:
                  fieldPath: metadata.namespace
            # glibc keeps up to 8 malloc arenas per core, one per busy thread; their free pages
            # count against the memory limit, which the budgets of docs/design/resolution.md#memory
            # do not see. Two arenas keep the resident size close to what is held.
            - name: MALLOC_ARENA_MAX
              value: "2"
            {{- with .Values.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          ports:
            {{- if eq (include "pacto.hasGrpcServer" .) "true" }}
            - name: grpc
              containerPort: {{ .Values.grpc.port }}
              protocol: TCP
            {{- end }}
            - name: admin
              containerPort: {{ .Values.admin.port }}
              protocol: TCP
            {{- if eq (include "pacto.metricsSecure" .) "true" }}
            - name: metrics
              containerPort: {{ .Values.metrics.securePort }}
              protocol: TCP
            {{- end }}
          livenessProbe:
            httpGet:
              path: /healthz
              port: admin
            {{- toYaml .Values.livenessProbe | nindent 12 }}
          readinessProbe:
            httpGet:
              path: /readyz
              port: admin
            {{- toYaml .Values.readinessProbe | nindent 12 }}
          resources:
            {{- toYaml .Values.resources | nindent 12 }}
          securityContext:
            {{- toYaml .Values.securityContext | nindent 12 }}
          volumeMounts:
            - name: tmp
              mountPath: /tmp
            {{- if ne .Values.tls.mode "insecure" }}
            - name: tls
              mountPath: /etc/pacto/tls
              readOnly: true
            {{- end }}
            {{- with (include "pacto.extraVolumeMounts" . | trim) }}{{ . | nindent 12 }}{{- end }}
      volumes:
        - name: tmp
          emptyDir:
            sizeLimit: 16Mi
        {{- if ne .Values.tls.mode "insecure" }}
        - name: tls
          secret:
            secretName: {{ include "pacto.tlsSecretName" . }}
            defaultMode: 0440
        {{- end }}
        {{- with (include "pacto.extraVolumes" . | trim) }}{{ . | nindent 8 }}{{- end }}
      {{- with .Values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- if .Values.affinity }}
      affinity:
        {{- toYaml .Values.affinity | nindent 8 }}
      {{- else if and (eq (include "pacto.replicated" .) "true") (ne .Values.podAntiAffinity "off") }}
      affinity:
        podAntiAffinity:
          {{- if eq .Values.podAntiAffinity "required" }}
          requiredDuringSchedulingIgnoredDuringExecution:
            - topologyKey: kubernetes.io/hostname
              labelSelector:
                matchLabels:
                  {{- include "pacto.selectorLabels" . | nindent 18 }}
          {{- else }}
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 100
              podAffinityTerm:
                topologyKey: kubernetes.io/hostname
                labelSelector:
                  matchLabels:
                    {{- include "pacto.selectorLabels" . | nindent 20 }}
          {{- end }}
      {{- end }}
      {{- with .Values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.topologySpreadConstraints }}
      topologySpreadConstraints:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end }}
