{{- define "tessel-member.fullname" -}}
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

{{- define "tessel-member.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tessel
{{- end -}}

{{/* The prober pods' labels: app.kubernetes.io/name is what probers and the operator select. */}}
{{- define "tessel-member.proberSelectorLabels" -}}
app.kubernetes.io/name: tessel-prober
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "tessel-member.operatorServiceAccountName" -}}
{{- required "operatorAccess.serviceAccount.name: the operator's ServiceAccount needs a name" .Values.operatorAccess.serviceAccount.name -}}
{{- end -}}

{{- define "tessel-member.proberServiceAccountName" -}}
{{- required "prober.serviceAccount.name: the prober's ServiceAccount needs a name" .Values.prober.serviceAccount.name -}}
{{- end -}}

{{- define "tessel-member.proberSecretName" -}}
{{- default (printf "%s-prober" (include "tessel-member.fullname" .)) .Values.prober.existingSecret -}}
{{- end -}}

{{/* Each job's job.json ConfigMap and token Secret (operator-rbac.yaml). */}}
{{- define "tessel-member.jobObjectRules" }}
  - apiGroups: [""]
    resources: [configmaps, secrets]
    verbs: [get, list, create, update, delete]
{{- end }}

{{/* Who gets the operator's rights: its ServiceAccount and operatorAccess.extraSubjects. */}}
{{- define "tessel-member.operatorSubjects" -}}
- kind: ServiceAccount
  name: {{ include "tessel-member.operatorServiceAccountName" . }}
  namespace: {{ .Release.Namespace }}
{{- with .Values.operatorAccess.extraSubjects }}
{{ toYaml . }}
{{- end }}
{{- end -}}
