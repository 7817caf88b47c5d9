{{/*
The cert-manager Certificate of this service's identity (tls.mode cert-manager only): its URI
SAN (the identity peers admit) and its DNS names (for hostname verification), from a namespaced
Issuer by default (docs/design/identity.md).
*/}}
{{- define "pacto.certificate" -}}
{{- if eq .Values.tls.mode "cert-manager" }}
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: {{ include "pacto.fullname" . }}-tls
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "pacto.labels" . | nindent 4 }}
spec:
  secretName: {{ include "pacto.tlsSecretName" . }}
  secretTemplate:
    labels:
      {{- include "pacto.labels" . | nindent 6 }}
  commonName: {{ include "pacto.identity" . | quote }}
  dnsNames:
    {{- include "pacto.certDnsNames" . | nindent 4 }}
  uris:
    - {{ include "pacto.uriIdentity" . | quote }}
  duration: {{ .Values.tls.certManager.duration }}
  renewBefore: {{ .Values.tls.certManager.renewBefore }}
  privateKey:
    algorithm: ECDSA
    size: 256
    encoding: PKCS8
    rotationPolicy: Always
  usages:
    - digital signature
    - key encipherment
    - client auth
    {{- if eq (include "pacto.servesTls" .) "true" }}
    - server auth
    {{- end }}
  issuerRef:
    name: {{ .Values.tls.certManager.issuerRef.name }}
    kind: {{ .Values.tls.certManager.issuerRef.kind }}
    group: {{ .Values.tls.certManager.issuerRef.group }}
{{- end }}
{{- end }}
