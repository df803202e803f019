{{/* The name of every object of this release. */}}
{{- define "tessel.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "tessel.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{ include "tessel.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tessel
{{- end -}}

{{- define "tessel.selectorLabels" -}}
app.kubernetes.io/name: tessel-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "tessel.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "tessel.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name: needed when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "tessel.tlsSecretName" -}}
{{- printf "%s-tls" (include "tessel.fullname" .) -}}
{{- end -}}

{{/* The webhook Service, and its DNS name (the certificate's first SAN). */}}
{{- define "tessel.serviceName" -}}
{{- include "tessel.fullname" . -}}
{{- end -}}
{{- define "tessel.serviceDns" -}}
{{- printf "%s.%s.svc" (include "tessel.serviceName" .) .Release.Namespace -}}
{{- end -}}
{{- define "tessel.stageServiceName" -}}
{{- printf "%s-stage" (include "tessel.fullname" .) -}}
{{- end -}}

{{/* HOST:PORT stage pods dial: stageService.advertise, else the stage Service's in-cluster name. */}}
{{- define "tessel.stageAdvertise" -}}
{{- if .Values.stageService.advertise -}}
{{- .Values.stageService.advertise -}}
{{- else -}}
{{- printf "%s.%s.svc:%d" (include "tessel.stageServiceName" .) .Release.Namespace (int .Values.stageService.port) -}}
{{- end -}}
{{- end -}}

{{/* The host of stageService.advertise (brackets of an IPv6 address removed). */}}
{{- define "tessel.stageAdvertiseHost" -}}
{{- $a := include "tessel.stageAdvertise" . -}}
{{- if hasPrefix "[" $a -}}
{{- regexReplaceAll "^\\[(.*)\\]:[0-9]+$" $a "${1}" -}}
{{- else -}}
{{- regexReplaceAll ":[0-9]+$" $a "" -}}
{{- end -}}
{{- end -}}

{{- define "tessel.isIP" -}}
{{- if or (regexMatch "^[0-9]+\\.[0-9]+\\.[0-9]+\\.[0-9]+$" .) (contains ":" .) -}}true{{- end -}}
{{- end -}}

{{/* The serving certificate's DNS names and IPs, as JSON lists. */}}
{{- define "tessel.certDnsNames" -}}
{{- $svc := include "tessel.serviceName" . -}}
{{- $stage := include "tessel.stageServiceName" . -}}
{{- $ns := .Release.Namespace -}}
{{- $names := list $svc (printf "%s.%s" $svc $ns) (include "tessel.serviceDns" .) (printf "%s.%s.svc.cluster.local" $svc $ns) $stage (printf "%s.%s" $stage $ns) (printf "%s.%s.svc" $stage $ns) (printf "%s.%s.svc.cluster.local" $stage $ns) -}}
{{- $host := include "tessel.stageAdvertiseHost" . -}}
{{- if not (include "tessel.isIP" $host) -}}{{- $names = append $names $host -}}{{- end -}}
{{- concat $names .Values.certificate.extraDnsNames | uniq | toJson -}}
{{- end -}}
{{- define "tessel.certIPs" -}}
{{- $ips := list -}}
{{- $host := include "tessel.stageAdvertiseHost" . -}}
{{- if include "tessel.isIP" $host -}}{{- $ips = append $ips $host -}}{{- end -}}
{{- concat $ips .Values.certificate.extraIPs | uniq | toJson -}}
{{- end -}}

{{/*
The generated CA and serving certificate, as a dict {ca, crt, key} of PEM. Kept across upgrades:
an existing Secret of this release whose certificate still names every SAN is reused, so the CA
that running jobs' stage pods trust stays valid. Computed once per render.
*/}}
{{- define "tessel.generatedCert" -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "tessel.tlsSecretName" .) -}}
{{- $sans := include "tessel.certSansChecksum" . -}}
{{- if and $existing $existing.data (eq (index ($existing.metadata.annotations | default dict) "tessel.dev/sans-sha256" | default "") $sans) -}}
{{- dict "ca" (index $existing.data "ca.crt" | b64dec) "crt" (index $existing.data "tls.crt" | b64dec) "key" (index $existing.data "tls.key" | b64dec) "sans" $sans | toJson -}}
{{- else -}}
{{- $days := int .Values.certificate.validityDays -}}
{{- $ca := genCA (printf "%s-ca" (include "tessel.fullname" .)) $days -}}
{{- $cert := genSignedCert (include "tessel.serviceDns" .) (include "tessel.certIPs" . | fromJsonArray) (include "tessel.certDnsNames" . | fromJsonArray) $days $ca -}}
{{- dict "ca" $ca.Cert "crt" $cert.Cert "key" $cert.Key "sans" $sans | toJson -}}
{{- end -}}
{{- end -}}

{{/*
What the replicas' certificate depends on, hashed: a change rolls the Deployment. (The generated
certificate itself cannot be hashed here: each render of it would differ.)
*/}}
{{- define "tessel.tlsChecksum" -}}
{{- if .Values.certificate.certManager.enabled -}}
{{- "cert-manager" | sha256sum -}}
{{- else -}}
{{- include "tessel.certSansChecksum" . -}}
{{- end -}}
{{- end -}}

{{- define "tessel.certSansChecksum" -}}
{{- printf "%s|%s" (include "tessel.certDnsNames" .) (include "tessel.certIPs" .) | sha256sum -}}
{{- end -}}

{{/* The operator's rights in the namespaces of the jobs it runs (rbac.yaml). */}}
{{- define "tessel.jobNamespaceRules" }}
  # Each job's token Secret (the hub copy, owned by the job).
  - apiGroups: [""]
    resources: [secrets]
    verbs: [get, create]
  # Events on TrainingJobs.
  - apiGroups: [""]
    resources: [events]
    verbs: [create, patch]
{{- end }}
