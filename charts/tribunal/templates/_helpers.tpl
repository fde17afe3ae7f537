{{/* Names and labels. */}}
{{- define "tribunal.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "tribunal.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "tribunal.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tribunal.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "tribunal.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "tribunal.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: tribunal
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "tribunal.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "tribunal.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The Secret the pods read (existing or created here); empty when there is none. */}}
{{- define "tribunal.secretName" -}}
{{- if .Values.secrets.existingSecret -}}
{{- .Values.secrets.existingSecret -}}
{{- else if or .Values.secrets.authToken .Values.secrets.databaseUrl -}}
{{- printf "%s-settings" (include "tribunal.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* The Secret of credentials the pods mount (existing, or made by the chart). */}}
{{- define "tribunal.credentialsSecret" -}}
{{- default (printf "%s-credentials" (include "tribunal.fullname" .)) .Values.credentials.existingSecret -}}
{{- end -}}

{{/* Where the KB writer's public keys come from: "configMap:NAME", "secret:NAME" or
nothing. Fails on more than one source, and on a value that is not a PEM public key (a
private key must never reach the serving pods). */}}
{{- define "tribunal.kbTrustedKeys" -}}
{{- $keys := .Values.kbTrustedKeys -}}
{{- $given := list -}}
{{- range $field := list "existingConfigMap" "existingSecret" "publicKeys" -}}
{{- if index $keys $field -}}
{{- $given = append $given (printf "kbTrustedKeys.%s" $field) -}}
{{- end -}}
{{- end -}}
{{- if gt (len $given) 1 -}}
{{- fail (printf "set one of %s, not several: they are the one folder of trusted KB public keys" (join ", " $given)) -}}
{{- end -}}
{{- range $name, $pem := $keys.publicKeys -}}
{{- if contains "PRIVATE KEY" $pem -}}
{{- fail (printf "kbTrustedKeys.publicKeys.%s is a private key: give the public key only (the KB's writer keeps its private key outside the cluster; docs/security.md)" $name) -}}
{{- end -}}
{{- if not (contains "-----BEGIN PUBLIC KEY-----" $pem) -}}
{{- fail (printf "kbTrustedKeys.publicKeys.%s is not a PEM public key (-----BEGIN PUBLIC KEY-----): copy a .pub file of the writer's trusted keys folder" $name) -}}
{{- end -}}
{{- end -}}
{{- if $keys.existingConfigMap -}}
{{- printf "configMap:%s" $keys.existingConfigMap -}}
{{- else if $keys.existingSecret -}}
{{- printf "secret:%s" $keys.existingSecret -}}
{{- else if $keys.publicKeys -}}
{{- printf "configMap:%s-kb-trusted-keys" (include "tribunal.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* The Ray custom resource a worker group advertises; applications request it. */}}
{{- define "tribunal.groupResource" -}}
{{- printf "tribunal_group_%s" . | replace "-" "_" -}}
{{- end -}}

{{/* Pod-level security: non-root, fixed ids, default seccomp. */}}
{{- define "tribunal.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.securityContext.runAsUser }}
runAsGroup: {{ .Values.securityContext.runAsGroup }}
fsGroup: {{ .Values.securityContext.fsGroup }}
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Container-level security: read-only root filesystem, no privilege, no capabilities. */}}
{{- define "tribunal.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.securityContext.runAsUser }}
runAsGroup: {{ .Values.securityContext.runAsGroup }}
allowPrivilegeEscalation: false
privileged: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* The model volume's claim: an existing one, the chart's, or none (an emptyDir). */}}
{{- define "tribunal.modelsClaim" -}}
{{- $persistence := .Values.models.persistence -}}
{{- if $persistence.existingClaim -}}
{{- $persistence.existingClaim -}}
{{- else if $persistence.enabled -}}
{{- printf "%s-models" (include "tribunal.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* Variables taken one by one: the Hugging Face token for gated models, and TLS. */}}
{{- define "tribunal.env" -}}
{{- if or .Values.models.hubToken.existingSecret (ne .Values.tls.mode "off") }}
env:
{{- with .Values.models.hubToken.existingSecret }}
  - name: HF_TOKEN
    valueFrom:
      secretKeyRef:
        name: {{ . }}
        key: {{ $.Values.models.hubToken.key }}
{{- end }}
{{- include "tribunal.tlsEnv" . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Pod template annotations: checksums of the settings the pods read at start (the
data only: a chart version alone rolls nothing), so a change rolls them (KubeRay: a new
cluster with upgradeStrategy NewCluster). */}}
{{- define "tribunal.podAnnotations" -}}
checksum/settings: {{ (include (print .Template.BasePath "/configmap.yaml") . | fromYaml).data | toJson | sha256sum }}
checksum/secret: {{ (include (print .Template.BasePath "/secret.yaml") . | fromYaml).stringData | toJson | sha256sum }}
{{- with .Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* KubeRay >= 1.6.0: as stated (kuberay.version) and, against a live cluster, as
served (RayCronJob, new in 1.6.0, beside RayService). An offline render knows no
cluster APIs, so there only the stated version is checked. */}}
{{- define "tribunal.requireKubeRay" -}}
{{- if not (semverCompare ">=1.6.0-0" (toString .Values.kuberay.version)) -}}
{{- fail (printf "kuberay.version is %s: this chart needs the KubeRay operator >= 1.6.0 (older operators drop the serve-grpc port from the serve Service, prune the worker groups' resources and lack authOptions); upgrade the operator and its CRDs, then set kuberay.version" (toString .Values.kuberay.version)) -}}
{{- end -}}
{{- if and (.Capabilities.APIVersions.Has "ray.io/v1/RayService") (not (.Capabilities.APIVersions.Has "ray.io/v1/RayCronJob")) -}}
{{- fail "this cluster serves ray.io/v1 RayService but not RayCronJob: its KubeRay CRDs are older than 1.6.0, which this chart needs; upgrade the KubeRay operator and apply its CRDs (helm upgrade of the operator chart does not update CRDs)" -}}
{{- end -}}
{{- end -}}

{{/* GPU capacity of each worker group: one replica's numGpus must fit on one pod, and
the group's GPUs (maxReplicas x gpus) must hold every application placed on it at its
largest (replicas, or maxReplicas, x numGpus); otherwise replicas stay pending and
applications DEPLOYING. */}}
{{- define "tribunal.checkCapacity" -}}
{{- $root := . -}}
{{- range $groupName, $group := .Values.workerGroups -}}
{{- if $group.enabled -}}
{{- $asked := 0.0 -}}
{{- $parts := list -}}
{{- range $name := list "retrieval" "entailment" "ensemble" "debate" "confidence" "gateway" -}}
{{- $app := index $root.Values.serve.applications $name -}}
{{- if and (eq $app.workerGroup $groupName) (gt (float64 $app.numGpus) 0.0) -}}
{{- if gt (float64 $app.numGpus) (float64 $group.gpus) -}}
{{- fail (printf "serve.applications.%s.numGpus (%v) exceeds workerGroups.%s.gpus (%v): one replica must fit on one pod of its worker group" $name $app.numGpus $groupName $group.gpus) -}}
{{- end -}}
{{- $count := $app.maxReplicas -}}
{{- if not (kindIs "invalid" $app.replicas) -}}
{{- $count = $app.replicas -}}
{{- end -}}
{{- $asked = addf $asked (mulf $count $app.numGpus) -}}
{{- $parts = append $parts (printf "%s %v x %v" $name $count $app.numGpus) -}}
{{- end -}}
{{- end -}}
{{- $capacity := mulf $group.maxReplicas $group.gpus -}}
{{- if gt $asked $capacity -}}
{{- fail (printf "workerGroups.%s holds %v GPUs at most (maxReplicas %v x gpus %v) but its applications can ask for %v (%s replicas x numGpus): raise workerGroups.%s.maxReplicas or gpus, or lower the applications' maxReplicas" $groupName $capacity $group.maxReplicas $group.gpus $asked (join ", " $parts) $groupName) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Settings every Ray container reads: the ConfigMap, then the Secret. */}}
{{- define "tribunal.envFrom" -}}
- configMapRef:
    name: {{ include "tribunal.fullname" . }}-settings
{{- $secret := include "tribunal.secretName" . }}
{{- if $secret }}
- secretRef:
    name: {{ $secret }}
    optional: {{ .Values.secrets.optional }}
{{- end }}
{{- end -}}

{{/* Writable paths under a read-only root: /tmp (Ray's session dir), /dev/shm (the object
store), the model cache and the data dir. Argument: (dict "root" $ "shmSize" "8Gi"). */}}
{{- define "tribunal.volumes" -}}
- name: tmp
  emptyDir: {}
- name: dshm
  emptyDir:
    medium: Memory
    sizeLimit: {{ .shmSize }}
- name: models
{{- $claim := include "tribunal.modelsClaim" .root }}
{{- if $claim }}
  persistentVolumeClaim:
    claimName: {{ $claim }}
{{- else }}
  emptyDir:
    sizeLimit: {{ .root.Values.models.sizeLimit }}
{{- end }}
- name: data
{{- if .root.Values.data.existingClaim }}
  persistentVolumeClaim:
    claimName: {{ .root.Values.data.existingClaim }}
{{- else }}
  emptyDir:
    sizeLimit: {{ .root.Values.data.sizeLimit }}
{{- end }}
{{- if ne .root.Values.tls.mode "off" }}
# The CA (its key: for the init container that issues the pod's certificate only).
- name: tls-ca
  secret:
    secretName: {{ include "tribunal.tlsCaSecret" .root }}
    # 0440 (read for the owner and the pod's fsGroup only).
    defaultMode: 288
# The pod's certificate, key and CA, issued at start; in memory, never on a disk.
- name: tls
  emptyDir:
    medium: Memory
    sizeLimit: 1Mi
{{- end }}
# Who may call the applications: kubelet refreshes the files when the Secret changes.
- name: credentials
  secret:
    secretName: {{ include "tribunal.credentialsSecret" .root }}
    # 0440 (read for the owner and the pod's fsGroup only).
    defaultMode: 288
{{- $kbKeys := include "tribunal.kbTrustedKeys" .root }}
{{- if $kbKeys }}
# The KB writer's public keys only (gateway.kb_trusted_keys); kubelet refreshes them.
- name: kb-trusted-keys
{{- if hasPrefix "secret:" $kbKeys }}
  secret:
    secretName: {{ trimPrefix "secret:" $kbKeys }}
    # 0444: public keys.
    defaultMode: 292
{{- else }}
  configMap:
    name: {{ trimPrefix "configMap:" $kbKeys }}
    # 0444: public keys.
    defaultMode: 292
{{- end }}
{{- end }}
{{- end -}}

{{- define "tribunal.volumeMounts" -}}
- name: tmp
  mountPath: /tmp
- name: dshm
  mountPath: /dev/shm
- name: models
  mountPath: /models
- name: data
  mountPath: /data
- name: credentials
  mountPath: /etc/tribunal/credentials
  readOnly: true
{{- if ne .Values.tls.mode "off" }}
- name: tls
  mountPath: /etc/tribunal/tls
  readOnly: true
{{- end }}
{{- if include "tribunal.kbTrustedKeys" . }}
- name: kb-trusted-keys
  mountPath: /etc/tribunal/kb-trusted
  readOnly: true
{{- end }}
{{- end -}}

{{/* Copy the weights baked into the image (the tiny profile's) into the model volume,
so the read-only image stays read-only and the cache stays writable.
Argument: (dict "root" $ "image" "repo:tag"). */}}
{{- define "tribunal.initContainers" -}}
{{- if or .root.Values.models.seedFromImage (ne .root.Values.tls.mode "off") }}
initContainers:
{{- include "tribunal.tlsInitContainer" . | nindent 2 }}
{{- end }}
{{- if .root.Values.models.seedFromImage }}
  - name: seed-models
    image: {{ .image | quote }}
    imagePullPolicy: {{ .root.Values.image.pullPolicy }}
    command: ["/bin/sh", "-c", "cp -Rn /opt/tribunal/models/. /models/ && echo seeded"]
    resources:
      requests: {cpu: 100m, memory: 128Mi}
      limits: {cpu: "1", memory: 512Mi}
    securityContext:
      {{- include "tribunal.containerSecurityContext" .root | nindent 6 }}
    volumeMounts:
      - name: models
        mountPath: /models
{{- end }}
{{- end -}}

{{/* Stop the container's Ray node cleanly before the pod goes away. */}}
{{- define "tribunal.lifecycle" -}}
preStop:
  exec:
    command: ["/bin/sh", "-c", "ray stop"]
{{- end -}}

{{/*
The Serve config (serveConfigV2): the same structure `tribunal serve config` writes
(tribunal.deploy): one application per service, import path
tribunal.deploy.apps:<name>, args {profile, settings}, one deployment named after the
application with its autoscaling and actor options; grpc_options list every servicer.
Batch sizes travel in args.settings (they need a restart); replicas and resources in
the deployment entry (Serve applies them over the code's without a restart, and
`tribunal ops scale` edits only those).
*/}}
{{- define "tribunal.serveConfig" -}}
{{- $root := . -}}
{{- $apps := list -}}
{{- range $name := list "retrieval" "entailment" "ensemble" "debate" "confidence" "gateway" -}}
{{- $app := index $root.Values.serve.applications $name -}}
{{- $group := default (dict) (index $root.Values.workerGroups $app.workerGroup) -}}
{{- if not $group.enabled -}}
{{- fail (printf "serve.applications.%s.workerGroup: %q is not an enabled worker group (workerGroups.%s.enabled)" $name $app.workerGroup $app.workerGroup) -}}
{{- end -}}
{{- if and (gt (float64 $app.numGpus) 0.0) (eq (int $group.gpus) 0) -}}
{{- fail (printf "serve.applications.%s.numGpus is %v but workerGroups.%s has no GPUs (gpus: 0)" $name $app.numGpus $app.workerGroup) -}}
{{- end -}}
{{- if lt (int $app.maxOngoingRequests) (int $app.maxBatchSize) -}}
{{- fail (printf "serve.applications.%s.maxOngoingRequests (%v) must be >= maxBatchSize (%v), or batches never fill" $name $app.maxOngoingRequests $app.maxBatchSize) -}}
{{- end -}}
{{- $fixed := not (kindIs "invalid" $app.replicas) -}}
{{- if and (not $fixed) (gt (int $app.minReplicas) (int $app.maxReplicas)) -}}
{{- fail (printf "serve.applications.%s.minReplicas (%v) must be <= maxReplicas (%v)" $name $app.minReplicas $app.maxReplicas) -}}
{{- end -}}
{{- /* Replica counts stay out of args: they live in the deployment entry only. */ -}}
{{- $deployment := dict
  "num_cpus" $app.numCpus
  "num_gpus" $app.numGpus
  "max_batch_size" $app.maxBatchSize
  "batch_wait_timeout_s" $app.batchWaitTimeoutS
  "max_ongoing_requests" $app.maxOngoingRequests -}}
{{- $settings := dict "model_dir" $root.Values.serve.modelDir "data_dir" $root.Values.serve.dataDir $name (dict "deployment" $deployment) -}}
{{- $actor := dict "num_cpus" $app.numCpus "num_gpus" $app.numGpus "resources" (dict (include "tribunal.groupResource" $app.workerGroup) 0.001) -}}
{{- $autoscaling := dict "min_replicas" $app.minReplicas "max_replicas" $app.maxReplicas "target_ongoing_requests" $app.targetOngoingRequests -}}
{{- $entry := dict "name" $name "max_ongoing_requests" $app.maxOngoingRequests "ray_actor_options" $actor -}}
{{- if $fixed -}}
{{- $_ := set $entry "num_replicas" $app.replicas -}}
{{- /* null overrides the autoscaling the application's code sets; otherwise it wins. */ -}}
{{- $_ := set $entry "autoscaling_config" nil -}}
{{- else -}}
{{- $_ := set $entry "autoscaling_config" $autoscaling -}}
{{- end -}}
{{- $app := dict "name" $name "route_prefix" (printf "/%s" $name) "import_path" (printf "tribunal.deploy.apps:%s" $name) "args" (dict "profile" $root.Values.profile "settings" $settings) "deployments" (list $entry) -}}
{{- /* A stage without a route is reached only through the gateway's handles. */ -}}
{{- if and (ne $name "gateway") (not $root.Values.serve.exposeStages) -}}
{{- $_ := set $app "route_prefix" nil -}}
{{- end -}}
{{- $apps = append $apps $app -}}
{{- end -}}
{{- include "tribunal.checkCapacity" $root -}}
{{- $servicers := list -}}
{{- /* Each service's proto methods, decoded tolerantly (bad bytes: INVALID_ARGUMENT). */ -}}
{{- range $module := list "confidence" "debate" "ensemble" "entailment" "gateway" "retrieval" -}}
{{- $servicers = append $servicers (printf "tribunal.deploy.proxy.%s" $module) -}}
{{- end -}}
{{- $config := dict
  "proxy_location" "EveryNode"
  "http_options" (dict "host" "0.0.0.0" "port" .Values.serve.httpPort)
  "grpc_options" (dict "port" .Values.serve.grpcPort "grpc_servicer_functions" $servicers)
  "logging_config" (dict "encoding" "JSON" "log_level" .Values.serve.logLevel)
  "applications" $apps -}}
{{- toYaml $config -}}
{{- end -}}

{{/* The Secret of the CA the Ray pods' certificates are issued from. */}}
{{- define "tribunal.tlsCaSecret" -}}
{{- default (printf "%s-tls-ca" (include "tribunal.fullname" .)) .Values.tls.caSecret -}}
{{- end -}}

{{/* Issue the pod's certificate (init container): its IP, loopback and the release's
Service names, from the CA (whose key no other container sees). Argument:
(dict "root" $ "image" "repo:tag"). */}}
{{- define "tribunal.tlsInitContainer" -}}
{{- if ne .root.Values.tls.mode "off" }}
{{- $ns := .root.Release.Namespace }}
{{- $domain := .root.Values.tls.clusterDomain }}
- name: issue-tls
  image: {{ .image | quote }}
  imagePullPolicy: {{ .root.Values.image.pullPolicy }}
  command:
    - /bin/sh
    - -c
    - >-
      exec tribunal tls issue --ca-cert /etc/tribunal/tls-ca/tls.crt
      --ca-key /etc/tribunal/tls-ca/tls.key --out /etc/tribunal/tls
      --name "$POD_NAME" --ip "$POD_IP" --ip 127.0.0.1 --dns localhost
      --dns "*.{{ $ns }}.svc" --dns "*.{{ $ns }}.svc.{{ $domain }}"
      --dns "*.{{ $ns }}.pod.{{ $domain }}"
  env:
    - name: POD_IP
      valueFrom:
        fieldRef:
          fieldPath: status.podIP
    - name: POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
  resources:
    requests: {cpu: 100m, memory: 128Mi}
    limits: {cpu: "1", memory: 512Mi}
  securityContext:
    {{- include "tribunal.containerSecurityContext" .root | nindent 4 }}
  volumeMounts:
    - name: tls-ca
      mountPath: /etc/tribunal/tls-ca
      readOnly: true
    - name: tls
      mountPath: /etc/tribunal/tls
{{- end }}
{{- end -}}

{{/* The variables that turn TLS on in a Ray container: Ray's mutual TLS, and the worker
hook that binds Serve's gRPC proxy with the pod's certificate (tribunal.deploy). */}}
{{- define "tribunal.tlsEnv" -}}
{{- if ne .Values.tls.mode "off" }}
- name: RAY_USE_TLS
  value: "1"
- name: RAY_TLS_SERVER_CERT
  value: /etc/tribunal/tls/tls.crt
- name: RAY_TLS_SERVER_KEY
  value: /etc/tribunal/tls/tls.key
- name: RAY_TLS_CA_CERT
  value: /etc/tribunal/tls/ca.crt
# Ray runs this hook in every worker it starts; it binds Serve's gRPC proxy with TLS.
- name: __RAY_WORKER_PROCESS_SETUP_HOOK_ENV_VAR
  value: tribunal.deploy._serve_grpc.configure_serve_grpc
- name: TRIBUNAL_GRPC_PROXY_TLS_CERT
  value: /etc/tribunal/tls/tls.crt
- name: TRIBUNAL_GRPC_PROXY_TLS_KEY
  value: /etc/tribunal/tls/tls.key
{{- if eq .Values.tls.mode "mutual" }}
- name: TRIBUNAL_GRPC_PROXY_TLS_CLIENT_CA
  value: /etc/tribunal/tls/ca.crt
{{- end }}
{{- end }}
{{- end -}}
