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
{{- if .root.Values.modelCache.existingClaim }}
  persistentVolumeClaim:
    claimName: {{ .root.Values.modelCache.existingClaim }}
{{- else }}
  emptyDir:
    sizeLimit: {{ .root.Values.modelCache.sizeLimit }}
{{- end }}
- name: data
{{- if .root.Values.data.existingClaim }}
  persistentVolumeClaim:
    claimName: {{ .root.Values.data.existingClaim }}
{{- else }}
  emptyDir:
    sizeLimit: {{ .root.Values.data.sizeLimit }}
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
{{- end -}}

{{/* Copy the weights baked into the image (the tiny profile's) into the model volume,
so the read-only image stays read-only and the cache stays writable.
Argument: (dict "root" $ "image" "repo:tag"). */}}
{{- define "tribunal.initContainers" -}}
{{- if .root.Values.modelCache.seedFromImage }}
initContainers:
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
{{- if gt (int $app.minReplicas) (int $app.maxReplicas) -}}
{{- fail (printf "serve.applications.%s.minReplicas (%v) must be <= maxReplicas (%v)" $name $app.minReplicas $app.maxReplicas) -}}
{{- end -}}
{{- /* Replica counts stay out of args: they live in the deployment entry only. */ -}}
{{- $deployment := dict
  "num_cpus" $app.numCpus
  "num_gpus" $app.numGpus
  "max_batch_size" $app.maxBatchSize
  "batch_wait_timeout_s" $app.batchWaitTimeoutS
  "max_ongoing_requests" $app.maxOngoingRequests -}}
{{- $settings := dict "model_dir" "/models" "data_dir" "/data" $name (dict "deployment" $deployment) -}}
{{- $actor := dict "num_cpus" $app.numCpus "num_gpus" $app.numGpus "resources" (dict (include "tribunal.groupResource" $app.workerGroup) 0.001) -}}
{{- $autoscaling := dict "min_replicas" $app.minReplicas "max_replicas" $app.maxReplicas "target_ongoing_requests" $app.targetOngoingRequests -}}
{{- $entry := dict "name" $name "max_ongoing_requests" $app.maxOngoingRequests "autoscaling_config" $autoscaling "ray_actor_options" $actor -}}
{{- $apps = append $apps (dict "name" $name "route_prefix" (printf "/%s" $name) "import_path" (printf "tribunal.deploy.apps:%s" $name) "args" (dict "profile" $root.Values.profile "settings" $settings) "deployments" (list $entry)) -}}
{{- end -}}
{{- $servicers := list -}}
{{- range $module, $service := dict "retrieval" "Retrieval" "entailment" "Entailment" "ensemble" "Ensemble" "debate" "Debate" "confidence" "Confidence" "gateway" "Gateway" -}}
{{- $servicers = append $servicers (printf "tribunal.v1.%s_pb2_grpc.add_%sServiceServicer_to_server" $module $service) -}}
{{- end -}}
{{- $config := dict
  "proxy_location" "EveryNode"
  "http_options" (dict "host" "0.0.0.0" "port" .Values.serve.httpPort)
  "grpc_options" (dict "port" .Values.serve.grpcPort "grpc_servicer_functions" $servicers)
  "logging_config" (dict "encoding" "JSON" "log_level" .Values.serve.logLevel)
  "applications" $apps -}}
{{- toYaml $config -}}
{{- end -}}
