{{/* Common labels of every object of the release. */}}
{{- define "antrea-proxy.labels" -}}
app.kubernetes.io/name: antrea-proxy
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component; call with (dict "ctx" $ "component" "antrea-agent"). */}}
{{- define "antrea-proxy.selectorLabels" -}}
app.kubernetes.io/name: antrea-proxy
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Image reference; call with (dict "ctx" $ "image" .Values.image.agent). */}}
{{- define "antrea-proxy.image" -}}
{{ .image.repository }}:{{ .image.tag | default .ctx.Chart.AppVersion }}
{{- end -}}

{{/* In-container paths shared by the templates. */}}
{{- define "antrea-proxy.tokenFile" -}}/var/run/antrea-api/token{{- end -}}

{{/*
antrea-agent.conf, parsed strictly by antrea-agent (pkg/config): every key here must exist in its
schema. Its sha256 is the checksum/config annotation of the agent Pods.
*/}}
{{- define "antrea-proxy.agentConf" -}}
{{- $p := .Values.antreaProxy -}}
# antrea-agent.conf, rendered by the antrea-proxy chart from its values.
# nodeName is left empty: the agent reads NODE_NAME, set from spec.nodeName.
{{- with .Values.kubeAPIServerOverride }}
kubeAPIServerOverride: {{ . | quote }}
{{- end }}
ovsBridge: {{ .Values.ovs.bridge | quote }}
ovsDatapathType: {{ .Values.ovs.datapathType | quote }}
ovsRunDir: /var/run/openvswitch
ovsOpenFlowBackend: {{ .Values.ovs.openFlowBackend | quote }}
hostGateway: {{ .Values.ovs.hostGateway | quote }}
apiSocket: /var/run/antrea/antrea-agent.sock
# Loopback only; the kubelet probes /healthz here. Other paths need the token, which the
# install-cni init container generates for each Pod.
apiTCPAddress: {{ printf "127.0.0.1:%d" (int .Values.agent.apiPort) | quote }}
apiTokenFile: {{ include "antrea-proxy.tokenFile" . }}
antreaProxy:
  enable: {{ $p.enable }}
  proxyAll: {{ $p.proxyAll }}
  nodePortAddresses: {{ $p.nodePortAddresses | toJson }}
  externalIPCIDRs: {{ $p.externalIPCIDRs | toJson }}
  skipServices: {{ $p.skipServices | toJson }}
  proxyLoadBalancerIPs: {{ $p.proxyLoadBalancerIPs }}
  serviceProxyName: {{ $p.serviceProxyName | quote }}
  minSyncInterval: {{ $p.minSyncInterval | quote }}
  fullSyncPeriod: {{ $p.fullSyncPeriod | quote }}
  maxFlowsPerService: {{ int64 $p.maxFlowsPerService }}
  maxFlows: {{ int64 $p.maxFlows }}
  flowRestoreTimeout: {{ $p.flowRestoreTimeout | quote }}
  healthzBindAddress: {{ $p.healthzBindAddress | quote }}
  metricsBindAddress: {{ $p.metricsBindAddress | quote }}
  rateLimits:
    {{- range $k, $v := $p.rateLimits }}
    {{ $k }}: {{ int64 $v }}
    {{- end }}
  # The class antrea-controller serves: the agent announces only its Services' addresses.
  loadBalancerClass: {{ .Values.controller.loadBalancerClass | quote }}
announcer:
  enableLease: {{ .Values.announcer.enableLease }}
  leaseNamespace: {{ .Release.Namespace | quote }}
  leaseDuration: {{ .Values.announcer.leaseDuration | quote }}
  renewInterval: {{ .Values.announcer.renewInterval | quote }}
  idleRenewInterval: {{ .Values.announcer.idleRenewInterval | quote }}
  handoverTimeout: {{ .Values.announcer.handoverTimeout | quote }}
  gratuitousInterval: {{ .Values.announcer.gratuitousInterval | quote }}
{{- end -}}

{{/*
antrea-controller.conf, parsed strictly by antrea-controller (pkg/config.ParseController). Its
sha256 is the checksum/config annotation of the controller Pods.
*/}}
{{- define "antrea-proxy.controllerConf" -}}
{{- $le := .Values.controller.leaderElection -}}
# antrea-controller.conf, rendered by the antrea-proxy chart from its values.
{{- with .Values.kubeAPIServerOverride }}
kubeAPIServerOverride: {{ . | quote }}
{{- end }}
loadBalancerClass: {{ .Values.controller.loadBalancerClass | quote }}
leaderElection:
  enable: {{ $le.enable }}
  leaseName: {{ $le.leaseName | quote }}
  leaseNamespace: {{ .Release.Namespace | quote }}
  leaseDuration: {{ $le.leaseDuration | quote }}
  renewDeadline: {{ $le.renewDeadline | quote }}
  retryPeriod: {{ $le.retryPeriod | quote }}
releaseGracePeriod: {{ .Values.controller.releaseGracePeriod | quote }}
announcerLeases:
  enable: {{ .Values.announcer.enableLease }}
  namespace: {{ .Release.Namespace | quote }}
{{- if .Values.lbPools }}
ipPools:
{{ toYaml .Values.lbPools }}
{{- else }}
# No pool: every LoadBalancer Service reports that no address pool is configured.
ipPools: []
{{- end }}
{{- end -}}

{{/*
The CNI network configuration list installed on every node. cniVersion 1.0.0: every plugin of the
list must support it, and the portmap of widely installed containernetworking-plugins (Debian
bookworm's 1.1.1) refuses 1.1.0; antrea-cni speaks both.
*/}}
{{- define "antrea-proxy.conflist" -}}
{{- $plugins := list (dict "type" "antrea-cni" "socketPath" "/var/run/antrea/cni.sock") -}}
{{- if .Values.agent.cni.portmap -}}
{{- $plugins = append $plugins (dict "type" "portmap" "capabilities" (dict "portMappings" true)) -}}
{{- end -}}
{{- dict "cniVersion" "1.0.0" "name" "antrea" "plugins" $plugins | toPrettyJson -}}
{{- end -}}
