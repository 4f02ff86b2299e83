{{/* Names and labels. */}}
{{- define "wqhost.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "wqhost.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "wqhost.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "wqhost.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "wqhost.selectorLabels" -}}
app.kubernetes.io/name: {{ include "wqhost.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "wqhost.labels" -}}
{{ include "wqhost.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
wqhost.dev/mode: {{ .Values.mode }}
{{- end -}}

{{- define "wqhost.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "wqhost.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "wqhost.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* The admin token's Secret: the user's, or the chart's own. */}}
{{- define "wqhost.adminSecretName" -}}
{{- default (printf "%s-admin" (include "wqhost.fullname" .)) .Values.admin.tokenSecret.name -}}
{{- end -}}

{{/* Environment variables the generated wqhost.yaml names. */}}
{{- define "wqhost.adminTokenEnv" -}}WQHOST_ADMIN_TOKEN{{- end -}}
{{- define "wqhost.azureConnectionEnv" -}}WQHOST_AZURE_CONNECTION_STRING{{- end -}}

{{/* The data directory: the PVC (sqlite) or an emptyDir (azure: the compilation cache). */}}
{{- define "wqhost.dataDir" -}}/var/lib/wqhost{{- end -}}

{{/* The azure queue endpoint suffix, as KEDA's endpointSuffix: queue.<storage suffix>. */}}
{{- define "wqhost.azureQueueSuffix" -}}
{{- $c := .Values.azure.cloud -}}
{{- if eq $c "AzurePublicCloud" -}}queue.core.windows.net
{{- else if eq $c "AzureUSGovernmentCloud" -}}queue.core.usgovcloudapi.net
{{- else if eq $c "AzureChinaCloud" -}}queue.core.chinacloudapi.cn
{{- else -}}{{ required "azure.endpointSuffix is required with azure.cloud Private (e.g. queue.core.example.net)" .Values.azure.endpointSuffix }}
{{- end -}}
{{- end -}}

{{/* The values' tenants, or with none the embedded default's billing binding. */}}
{{- define "wqhost.userTenants" -}}
{{- if .Values.tenants -}}
{{- toYaml .Values.tenants -}}
{{- else -}}
default:
  bindings:
    billing:
      queue: transactions
      output: priced
      module: builtin:billing-go
      config:
        tax_rate: "0.2"
{{- end -}}
{{- end -}}

{{/*
The tenants of wqhost.yaml: the values' tenants, each binding on the mode's backend. A
binding may not name another backend: the chart defines one.
*/}}
{{- define "wqhost.tenants" -}}
{{- $backend := get (dict "sqlite" "local" "azure" "azure" "nats" "nats") .Values.mode -}}
{{- $tenants := deepCopy (include "wqhost.userTenants" . | fromYaml) -}}
{{- range $tn, $t := $tenants -}}
{{- range $bn, $b := (get $t "bindings" | default dict) -}}
{{- $have := get $b "backend" | default $backend -}}
{{- if ne $have $backend -}}
{{- fail (printf "tenants.%s.bindings.%s.backend: %q, but mode %s defines only the backend %q (leave backend out)" $tn $bn $have $.Values.mode $backend) -}}
{{- end -}}
{{- $_ := set $b "backend" $backend -}}
{{- end -}}
{{- end -}}
{{- toYaml $tenants -}}
{{- end -}}

{{/* The settings a config reload cannot change (the host refuses them): a change rolls the pods. */}}
{{- define "wqhost.restartConfig" -}}
data_dir: {{ include "wqhost.dataDir" . }}
admin:
  addr: ":{{ .Values.admin.port }}"
  token_env: {{ include "wqhost.adminTokenEnv" . }}
shutdown:
  grace: {{ .Values.shutdown.graceSeconds }}s
backends:
{{- if eq .Values.mode "sqlite" }}
  local:
    type: local
    path: wqhost.db
    sync: {{ .Values.sqlite.sync }}
{{- else if eq .Values.mode "nats" }}
  nats:
    type: nats
    nats:
      urls:
        {{- required "nats.servers is required with mode nats" .Values.nats.servers | toYaml | nindent 8 }}
      {{- range $k, $v := pick .Values.nats "userEnv" "passwordEnv" "tokenEnv" "jwtEnv" "nkeySeedEnv" }}
      {{- if $v }}
      {{ $k | snakecase }}: {{ $v }}
      {{- end }}
      {{- end }}
      stream_prefix: {{ .Values.nats.streamPrefix | quote }}
      consumer: {{ .Values.nats.consumer | quote }}
      replicas: {{ .Values.nats.replicas }}
      {{- if .Values.nats.caSecret.name }}
      ca_file: /etc/wqhost-nats-ca/ca.crt
      {{- end }}
    create_queues: {{ .Values.nats.createQueues }}
{{- else }}
  azure:
    type: azure
{{- if eq .Values.azure.auth "connectionString" }}
    connection_string_env: {{ include "wqhost.azureConnectionEnv" . }}
{{- else }}
    account_name: {{ required "azure.accountName is required with azure.auth workloadIdentity" .Values.azure.accountName }}
    service_url: https://{{ .Values.azure.accountName }}.{{ include "wqhost.azureQueueSuffix" . }}/
    default_credential: true
{{- end }}
    encoding: {{ .Values.azure.encoding }}
    create_queues: {{ .Values.azure.createQueues }}
    idle_calls_per_hour: {{ .Values.azure.idleCallsPerHour }}
{{- end }}
{{- $other := omit (.Values.config | default dict) "max_concurrency" "max_bindings" }}
{{- if $other }}
{{ toYaml $other }}
{{- end }}
{{- end -}}

{{/*
The checksum of what only a restart applies: restartConfig without log.level, which the host
applies on a config reload (so a level change does not roll the pods).
*/}}
{{- define "wqhost.restartChecksum" -}}
{{- $v := deepCopy .Values -}}
{{- $log := get ($v.config | default dict) "log" -}}
{{- if kindIs "map" $log -}}{{- $_ := unset $log "level" -}}{{- end -}}
{{- include "wqhost.restartConfig" (dict "Values" $v "Release" .Release "Chart" .Chart "Capabilities" .Capabilities "Template" .Template) | sha256sum -}}
{{- end -}}

{{/* wqhost.yaml. */}}
{{- define "wqhost.config" -}}
{{ include "wqhost.restartConfig" . }}
{{- with pick (.Values.config | default dict) "max_concurrency" "max_bindings" }}
{{ toYaml . }}
{{- end }}
tenants:
{{ include "wqhost.tenants" . | indent 2 }}
{{- end -}}

{{/*
A KEDA trigger's name for tenant, binding and queue (a list of the three): tenant-binding-queue
when that fits KEDA's 63 characters, else its first 54 characters and a hash of all three, so
that two long names cut alike stay distinct (the hash is of the parts with "/" between them).
Dashes inside the parts can still make two triples spell one short name (a-b/c vs a/b-c):
"wqhost.uniqueTrigger" gives the second one a hash suffix too.
*/}}
{{- define "wqhost.triggerName" -}}
{{- $name := join "-" . -}}
{{- if gt (len $name) 63 -}}
{{- printf "%s-%s" ($name | trunc 54 | trimSuffix "-") (join "/" . | sha256sum | trunc 8) -}}
{{- else -}}
{{- $name -}}
{{- end -}}
{{- end -}}

{{/*
A trigger's name made unique among those in seen (a dict, updated): a list of seen, the name
and the queue it watches.
*/}}
{{- define "wqhost.uniqueTrigger" -}}
{{- $seen := index . 0 -}}{{- $name := index . 1 -}}
{{- if hasKey $seen $name -}}
{{- $name = printf "%s-%s" ($name | trunc 54 | trimSuffix "-") (index . 2 | sha256sum | trunc 8) -}}
{{- end -}}
{{- $_ := set $seen $name true -}}
{{- $name -}}
{{- end -}}

{{/*
The input queues KEDA watches, as the host names them on Azure: the tenant "default" keeps
its names, another tenant T's queue Q is <len(T)>-T-Q. One line per queue: "trigger-name queue".
*/}}
{{- define "wqhost.azureQueues" -}}
{{- range $tn, $t := (include "wqhost.userTenants" . | fromYaml) -}}
{{- range $bn, $b := (get $t "bindings" | default dict) -}}
{{- $qs := get $b "shards" | default (list (get $b "queue")) -}}
{{- range $i, $q := $qs -}}
{{- $phys := ternary $q (printf "%d-%s-%s" (len $tn) $tn $q) (eq $tn "default") -}}
{{ include "wqhost.triggerName" (list $tn $bn $q) }} {{ $phys }}
{{ end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The streams KEDA watches on NATS, as listener/nats names them: the physical queue (Q, or
T.Q for a tenant T other than default) with every byte but letters, digits and '-' escaped
as _XX, after the stream prefix. One line per queue: "trigger-name stream".
*/}}
{{- define "wqhost.natsStreams" -}}
{{- range $tn, $t := (include "wqhost.userTenants" . | fromYaml) -}}
{{- range $bn, $b := (get $t "bindings" | default dict) -}}
{{- $qs := get $b "shards" | default (list (get $b "queue")) -}}
{{- range $i, $q := $qs -}}
{{- $phys := ternary $q (printf "%s.%s" $tn $q) (eq $tn "default") -}}
{{- $esc := "" -}}
{{- range $c := splitList "" $phys -}}
{{- if regexMatch "^[A-Za-z0-9-]$" $c -}}{{- $esc = printf "%s%s" $esc $c -}}{{- else -}}{{- $esc = printf "%s_%X" $esc $c -}}{{- end -}}
{{- end -}}
{{ include "wqhost.triggerName" (list $tn $bn $q) }} {{ $.Values.nats.streamPrefix }}{{ $esc }}
{{ end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
NetworkPolicy egress rules for the bindings' http.allow entries
(scheme://host[:port][/path]): a rule naming an IP or CIDR allows that block, a name rule
any public address (the host's own special ranges excepted, as it refuses them for names);
the port as given, the scheme's default, or any with "*".
*/}}
{{- define "wqhost.httpEgress" -}}
{{- $rules := list -}}
{{- range $tn, $t := (include "wqhost.userTenants" . | fromYaml) -}}
{{- range $bn, $b := (get $t "bindings" | default dict) -}}
{{- range $r := (get (get $b "http" | default dict) "allow" | default list) -}}
{{- $rules = append $rules $r -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $r := $rules | uniq | sortAlpha -}}
{{- $re := `^([A-Za-z]+)://(\[[^\]]+\]|[^/:\[]+)(:([0-9]+|\*))?(/.*)?$` -}}
{{- if not (regexMatch $re $r) -}}
{{- fail (printf "http.allow %q: want scheme://host[:port][/path]" $r) -}}
{{- end -}}
{{- $scheme := regexReplaceAll $re $r "${1}" | lower -}}
{{- $host := regexReplaceAll $re $r "${2}" | trimPrefix "[" | trimSuffix "]" -}}
{{- $port := regexReplaceAll $re $r "${4}" -}}
{{- if eq $port "" -}}{{- $port = ternary "443" "80" (eq $scheme "https") -}}{{- end -}}
- # {{ $r }}
{{- if regexMatch `^[0-9.]+(/[0-9]+)?$|:` $host }}
  to:
    - ipBlock:
        cidr: {{ ternary $host (printf "%s/%s" $host (ternary "128" "32" (contains ":" $host))) (contains "/" $host) }}
{{- else }}
  to:
    - ipBlock:
        cidr: 0.0.0.0/0
        except: [0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10, 127.0.0.0/8, 169.254.0.0/16, 172.16.0.0/12, 192.0.0.0/24, 192.168.0.0/16, 198.18.0.0/15, 224.0.0.0/4, 240.0.0.0/4]
    - ipBlock:
        cidr: ::/0
        except: ["::/128", "::1/128", "100::/64", "2001:db8::/32", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8"]
{{- end }}
{{- if ne $port "*" }}
  ports:
    - protocol: TCP
      port: {{ $port }}
{{- end }}
{{ end -}}
{{- end -}}

{{/* The scaling in effect: keda, hpa or none. */}}
{{- define "wqhost.scaling" -}}
{{- $k := .Values.scaling.kind -}}
{{- if eq $k "auto" -}}{{- ternary "none" "keda" (eq .Values.mode "sqlite") -}}{{- else -}}{{- $k -}}{{- end -}}
{{- end -}}

{{/* The HorizontalPodAutoscaler scaling the Deployment: the chart's, or the one KEDA makes. */}}
{{- define "wqhost.hpaName" -}}
{{- if eq (include "wqhost.scaling" .) "keda" -}}keda-hpa-{{ include "wqhost.fullname" . }}{{- else -}}{{ include "wqhost.fullname" . }}{{- end -}}
{{- end -}}
