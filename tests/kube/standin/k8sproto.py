"""Protobuf request bodies of the built-in kinds, decoded to the JSON the
same client would have sent.

kubectl 1.32+ sends `application/vnd.kubernetes.protobuf` for its typed
creates (`create secret|configmap|namespace|serviceaccount|role|clusterrole|
rolebinding|clusterrolebinding|deployment|cronjob|job|service|token`,
`auth can-i`). The body is `k8s\\0` + runtime.Unknown {1 typeMeta {1
apiVersion, 2 kind}, 2 raw}; raw is the object in the proto2 encoding of its
Go type. MESSAGES below lists, per message, `NUMBER jsonName TYPE FLAGS` as the
Go types of k8s.io/api and k8s.io/apimachinery declare them in their
`protobuf:` and `json:` struct tags (extracted from those types as of
2026-07; a field the table lacks is skipped, as kube-apiserver's decoder
skips unknown fields). TYPE: `s` string, `b` bytes (base64 in JSON), `i`
integer, `?` bool, `t` meta Time, `q` Quantity, `x` IntOrString, `fv`
FieldsV1, `{s}`/`{b}`/`{q}` maps of those, else a message. FLAGS: `r`
repeated, `p` a Go pointer (present even when zero), `o` omitempty (a zero
value is left out, as encoding/json leaves it out), `l` inlined into the
parent (an embedded Go struct), `-` none.
"""
import base64
import datetime
import json

KINDS = {   # (apiVersion, kind) -> message
    ("v1", "Secret"): "core.Secret", ("v1", "ConfigMap"): "core.ConfigMap", ("v1", "Namespace"): "core.Namespace",
    ("v1", "ServiceAccount"): "core.ServiceAccount", ("v1", "Service"): "core.Service",
    ("authentication.k8s.io/v1", "TokenRequest"): "authn.TokenRequest",
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): "authz.SelfSubjectAccessReview",
    ("rbac.authorization.k8s.io/v1", "Role"): "rbac.Role", ("rbac.authorization.k8s.io/v1", "ClusterRole"): "rbac.ClusterRole",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "rbac.RoleBinding",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "rbac.ClusterRoleBinding",
    ("apps/v1", "Deployment"): "apps.Deployment", ("batch/v1", "Job"): "batch.Job", ("batch/v1", "CronJob"): "batch.CronJob",
    ("autoscaling/v1", "HorizontalPodAutoscaler"): "as1.HorizontalPodAutoscaler",
    ("autoscaling/v2", "HorizontalPodAutoscaler"): "as2.HorizontalPodAutoscaler",
}

MESSAGES = """
apps.Deployment: 1 metadata meta.ObjectMeta o; 2 spec apps.DeploymentSpec o; 3 status apps.DeploymentStatus o
apps.DeploymentCondition: 1 type s -; 2 status s -; 6 lastUpdateTime t o; 7 lastTransitionTime t o; 4 reason s o; 5 message s o
apps.DeploymentSpec: 1 replicas i po; 2 selector meta.LabelSelector p; 3 template core.PodTemplateSpec -; 4 strategy apps.DeploymentStrategy o; 5 minReadySeconds i o; 6 revisionHistoryLimit i po; 7 paused ? o; 9 progressDeadlineSeconds i po
apps.DeploymentStatus: 1 observedGeneration i o; 2 replicas i o; 3 updatedReplicas i o; 7 readyReplicas i o; 4 availableReplicas i o; 5 unavailableReplicas i o; 9 terminatingReplicas i po; 6 conditions apps.DeploymentCondition ro; 8 collisionCount i po
apps.DeploymentStrategy: 1 type s o; 2 rollingUpdate apps.RollingUpdateDeployment po
apps.RollingUpdateDeployment: 1 maxUnavailable x po; 2 maxSurge x po
as1.CrossVersionObjectReference: 1 kind s -; 2 name s -; 3 apiVersion s o
as1.HorizontalPodAutoscaler: 1 metadata meta.ObjectMeta o; 2 spec as1.HorizontalPodAutoscalerSpec o; 3 status as1.HorizontalPodAutoscalerStatus o
as1.HorizontalPodAutoscalerSpec: 1 scaleTargetRef as1.CrossVersionObjectReference -; 2 minReplicas i po; 3 maxReplicas i -; 4 targetCPUUtilizationPercentage i po
as1.HorizontalPodAutoscalerStatus: 1 observedGeneration i po; 2 lastScaleTime t po; 3 currentReplicas i -; 4 desiredReplicas i -; 5 currentCPUUtilizationPercentage i po
as2.ContainerResourceMetricSource: 1 name s -; 2 target as2.MetricTarget -; 3 container s -
as2.ContainerResourceMetricStatus: 1 name s -; 2 current as2.MetricValueStatus -; 3 container s -
as2.CrossVersionObjectReference: 1 kind s -; 2 name s -; 3 apiVersion s o
as2.ExternalMetricSource: 1 metric as2.MetricIdentifier -; 2 target as2.MetricTarget -
as2.ExternalMetricStatus: 1 metric as2.MetricIdentifier -; 2 current as2.MetricValueStatus -
as2.HPAScalingPolicy: 1 type s -; 2 value i -; 3 periodSeconds i -
as2.HPAScalingRules: 3 stabilizationWindowSeconds i po; 1 selectPolicy s po; 2 policies as2.HPAScalingPolicy ro; 4 tolerance q po
as2.HorizontalPodAutoscaler: 1 metadata meta.ObjectMeta o; 2 spec as2.HorizontalPodAutoscalerSpec o; 3 status as2.HorizontalPodAutoscalerStatus o
as2.HorizontalPodAutoscalerBehavior: 1 scaleUp as2.HPAScalingRules po; 2 scaleDown as2.HPAScalingRules po
as2.HorizontalPodAutoscalerCondition: 1 type s -; 2 status s -; 3 lastTransitionTime t o; 4 reason s o; 5 message s o; 6 observedGeneration i po
as2.HorizontalPodAutoscalerSpec: 1 scaleTargetRef as2.CrossVersionObjectReference -; 2 minReplicas i po; 3 maxReplicas i -; 4 metrics as2.MetricSpec ro; 5 behavior as2.HorizontalPodAutoscalerBehavior po
as2.HorizontalPodAutoscalerStatus: 1 observedGeneration i po; 2 lastScaleTime t po; 3 currentReplicas i o; 4 desiredReplicas i -; 5 currentMetrics as2.MetricStatus r; 6 conditions as2.HorizontalPodAutoscalerCondition ro
as2.MetricIdentifier: 1 name s -; 2 selector meta.LabelSelector po
as2.MetricSpec: 1 type s -; 2 object as2.ObjectMetricSource po; 3 pods as2.PodsMetricSource po; 4 resource as2.ResourceMetricSource po; 7 containerResource as2.ContainerResourceMetricSource po; 5 external as2.ExternalMetricSource po
as2.MetricStatus: 1 type s -; 2 object as2.ObjectMetricStatus po; 3 pods as2.PodsMetricStatus po; 4 resource as2.ResourceMetricStatus po; 7 containerResource as2.ContainerResourceMetricStatus po; 5 external as2.ExternalMetricStatus po
as2.MetricTarget: 1 type s -; 2 value q po; 3 averageValue q po; 4 averageUtilization i po
as2.MetricValueStatus: 1 value q po; 2 averageValue q po; 3 averageUtilization i po
as2.ObjectMetricSource: 1 describedObject as2.CrossVersionObjectReference -; 2 target as2.MetricTarget -; 3 metric as2.MetricIdentifier -
as2.ObjectMetricStatus: 1 metric as2.MetricIdentifier -; 2 current as2.MetricValueStatus -; 3 describedObject as2.CrossVersionObjectReference -
as2.PodsMetricSource: 1 metric as2.MetricIdentifier -; 2 target as2.MetricTarget -
as2.PodsMetricStatus: 1 metric as2.MetricIdentifier -; 2 current as2.MetricValueStatus -
as2.ResourceMetricSource: 1 name s -; 2 target as2.MetricTarget -
as2.ResourceMetricStatus: 1 name s -; 2 current as2.MetricValueStatus -
authn.BoundObjectReference: 1 kind s o; 2 apiVersion s o; 3 name s o; 4 uid s o
authn.TokenRequest: 1 metadata meta.ObjectMeta o; 2 spec authn.TokenRequestSpec -; 3 status authn.TokenRequestStatus o
authn.TokenRequestSpec: 1 audiences s r; 4 expirationSeconds i p; 3 boundObjectRef authn.BoundObjectReference p; 5 attestations {Mauthn.AttestationValue} o
authn.TokenRequestStatus: 1 token s -; 2 expirationTimestamp t -
authz.FieldSelectorAttributes: 1 rawSelector s o; 2 requirements meta.FieldSelectorRequirement ro
authz.LabelSelectorAttributes: 1 rawSelector s o; 2 requirements meta.LabelSelectorRequirement ro
authz.NonResourceAttributes: 1 path s o; 2 verb s o
authz.ResourceAttributes: 1 namespace s o; 2 verb s o; 3 group s o; 4 version s o; 5 resource s o; 6 subresource s o; 7 name s o; 8 fieldSelector authz.FieldSelectorAttributes po; 9 labelSelector authz.LabelSelectorAttributes po
authz.SelfSubjectAccessReview: 1 metadata meta.ObjectMeta o; 2 spec authz.SelfSubjectAccessReviewSpec -; 3 status authz.SubjectAccessReviewStatus o
authz.SelfSubjectAccessReviewSpec: 1 resourceAttributes authz.ResourceAttributes po; 2 nonResourceAttributes authz.NonResourceAttributes po
authz.SubjectAccessReviewStatus: 1 allowed ? -; 4 denied ? o; 2 reason s o; 3 evaluationError s o
batch.CronJob: 1 metadata meta.ObjectMeta o; 2 spec batch.CronJobSpec o; 3 status batch.CronJobStatus o
batch.CronJobSpec: 1 schedule s -; 8 timeZone s po; 2 startingDeadlineSeconds i po; 3 concurrencyPolicy s o; 4 suspend ? po; 5 jobTemplate batch.JobTemplateSpec -; 6 successfulJobsHistoryLimit i po; 7 failedJobsHistoryLimit i po
batch.CronJobStatus: 1 active core.ObjectReference ro; 4 lastScheduleTime t po; 5 lastSuccessfulTime t po
batch.Job: 1 metadata meta.ObjectMeta o; 2 spec batch.JobSpec o; 3 status batch.JobStatus o
batch.JobCondition: 1 type s -; 2 status s -; 3 lastProbeTime t o; 4 lastTransitionTime t o; 5 reason s o; 6 message s o
batch.JobSchedulingConfiguration: 1 schedulingPolicy schedulingv1alpha3.WorkloadPodGroupSchedulingPolicy po; 2 schedulingConstraints schedulingv1alpha3.WorkloadPodGroupSchedulingConstraints po; 3 disruptionMode schedulingv1alpha3.WorkloadPodGroupDisruptionMode po; 4 resourceClaims schedulingv1alpha3.WorkloadPodGroupResourceClaim ro
batch.JobSpec: 1 parallelism i po; 2 completions i po; 3 activeDeadlineSeconds i po; 11 podFailurePolicy batch.PodFailurePolicy po; 16 successPolicy batch.SuccessPolicy po; 7 backoffLimit i po; 12 backoffLimitPerIndex i po; 13 maxFailedIndexes i po; 4 selector meta.LabelSelector po; 5 manualSelector ? po; 6 template core.PodTemplateSpec -; 8 ttlSecondsAfterFinished i po; 9 completionMode s po; 10 suspend ? po; 14 podReplacementPolicy s po; 15 managedBy s po; 17 scheduling batch.JobSchedulingConfiguration po
batch.JobStatus: 1 conditions batch.JobCondition ro; 2 startTime t po; 3 completionTime t po; 4 active i o; 5 succeeded i o; 6 failed i o; 11 terminating i po; 7 completedIndexes s o; 10 failedIndexes s po; 8 uncountedTerminatedPods batch.UncountedTerminatedPods po; 9 ready i po
batch.JobTemplateSpec: 1 metadata meta.ObjectMeta o; 2 spec batch.JobSpec o
batch.PodFailurePolicy: 1 rules batch.PodFailurePolicyRule r
batch.PodFailurePolicyOnExitCodesRequirement: 1 containerName s po; 2 operator s -; 3 values i r
batch.PodFailurePolicyOnPodConditionsPattern: 1 type s -; 2 status s -
batch.PodFailurePolicyRule: 1 action s -; 2 onExitCodes batch.PodFailurePolicyOnExitCodesRequirement po; 3 onPodConditions batch.PodFailurePolicyOnPodConditionsPattern ro
batch.SuccessPolicy: 1 rules batch.SuccessPolicyRule r
batch.SuccessPolicyRule: 1 succeededIndexes s po; 2 succeededCount i po
batch.UncountedTerminatedPods: 1 succeeded s ro; 2 failed s ro
core.AWSElasticBlockStoreVolumeSource: 1 volumeID s -; 2 fsType s o; 3 partition i o; 4 readOnly ? o
core.Affinity: 1 nodeAffinity core.NodeAffinity po; 2 podAffinity core.PodAffinity po; 3 podAntiAffinity core.PodAntiAffinity po
core.AppArmorProfile: 1 type s -; 2 localhostProfile s po
core.AzureDiskVolumeSource: 1 diskName s -; 2 diskURI s -; 3 cachingMode s po; 4 fsType s po; 5 readOnly ? po; 6 kind s po
core.AzureFileVolumeSource: 1 secretName s -; 2 shareName s -; 3 readOnly ? o
core.CSIVolumeSource: 1 driver s -; 2 readOnly ? po; 3 fsType s po; 4 volumeAttributes {s} o; 5 nodePublishSecretRef core.LocalObjectReference po
core.Capabilities: 1 add s ro; 2 drop s ro
core.CephFSVolumeSource: 1 monitors s r; 2 path s o; 3 user s o; 4 secretFile s o; 5 secretRef core.LocalObjectReference po; 6 readOnly ? o
core.CinderVolumeSource: 1 volumeID s -; 2 fsType s o; 3 readOnly ? o; 4 secretRef core.LocalObjectReference po
core.ClientIPConfig: 1 timeoutSeconds i po
core.ClusterTrustBundleProjection: 1 name s rpo; 2 signerName s rpo; 3 labelSelector meta.LabelSelector rpo; 5 optional ? po; 4 path s r; 6 user i po
core.ConfigMap: 1 metadata meta.ObjectMeta o; 4 immutable ? po; 2 data {s} o; 3 binaryData {b} o
core.ConfigMapEnvSource: 1 - core.LocalObjectReference l; 2 optional ? po
core.ConfigMapKeySelector: 1 - core.LocalObjectReference l; 2 key s -; 3 optional ? po
core.ConfigMapProjection: 1 - core.LocalObjectReference l; 2 items core.KeyToPath ro; 4 optional ? po
core.ConfigMapVolumeSource: 1 - core.LocalObjectReference l; 2 items core.KeyToPath ro; 3 defaultMode i po; 4 optional ? po; 5 defaultUser i po
core.Container: 1 name s -; 2 image s o; 3 command s ro; 4 args s ro; 5 workingDir s o; 6 ports core.ContainerPort ro; 19 envFrom core.EnvFromSource ro; 7 env core.EnvVar ro; 8 resources core.ResourceRequirements o; 23 resizePolicy core.ContainerResizePolicy ro; 24 restartPolicy s po; 25 restartPolicyRules core.ContainerRestartRule ro; 9 volumeMounts core.VolumeMount ro; 21 volumeDevices core.VolumeDevice ro; 10 livenessProbe core.Probe po; 11 readinessProbe core.Probe po; 22 startupProbe core.Probe po; 12 lifecycle core.Lifecycle po; 13 terminationMessagePath s o; 20 terminationMessagePolicy s o; 14 imagePullPolicy s o; 15 securityContext core.SecurityContext po; 16 stdin ? o; 17 stdinOnce ? o; 18 tty ? o
core.ContainerPort: 1 name s o; 2 hostPort i o; 3 containerPort i -; 4 protocol s o; 5 hostIP s o
core.ContainerResizePolicy: 1 resourceName s -; 2 restartPolicy s -
core.ContainerRestartRule: 1 action s o; 2 exitCodes core.ContainerRestartRuleOnExitCodes po
core.ContainerRestartRuleOnExitCodes: 1 operator s o; 2 values i ro
core.DownwardAPIProjection: 1 items core.DownwardAPIVolumeFile ro
core.DownwardAPIVolumeFile: 1 path s -; 2 fieldRef core.ObjectFieldSelector po; 3 resourceFieldRef core.ResourceFieldSelector po; 4 mode i po; 5 user i po
core.DownwardAPIVolumeSource: 1 items core.DownwardAPIVolumeFile ro; 2 defaultMode i po; 3 defaultUser i po
core.EmptyDirVolumeSource: 1 medium s o; 2 sizeLimit q po; 3 mode i po
core.EnvFromSource: 1 prefix s o; 2 configMapRef core.ConfigMapEnvSource po; 3 secretRef core.SecretEnvSource po
core.EnvVar: 1 name s -; 2 value s o; 3 valueFrom core.EnvVarSource po
core.EnvVarSource: 1 fieldRef core.ObjectFieldSelector po; 2 resourceFieldRef core.ResourceFieldSelector po; 3 configMapKeyRef core.ConfigMapKeySelector po; 4 secretKeyRef core.SecretKeySelector po; 5 fileKeyRef core.FileKeySelector po
core.EphemeralContainer: 1 - core.EphemeralContainerCommon l; 2 targetContainerName s o
core.EphemeralContainerCommon: 1 name s -; 2 image s o; 3 command s ro; 4 args s ro; 5 workingDir s o; 6 ports core.ContainerPort ro; 19 envFrom core.EnvFromSource ro; 7 env core.EnvVar ro; 8 resources core.ResourceRequirements o; 23 resizePolicy core.ContainerResizePolicy ro; 24 restartPolicy s po; 25 restartPolicyRules core.ContainerRestartRule ro; 9 volumeMounts core.VolumeMount ro; 21 volumeDevices core.VolumeDevice ro; 10 livenessProbe core.Probe po; 11 readinessProbe core.Probe po; 22 startupProbe core.Probe po; 12 lifecycle core.Lifecycle po; 13 terminationMessagePath s o; 20 terminationMessagePolicy s o; 14 imagePullPolicy s o; 15 securityContext core.SecurityContext po; 16 stdin ? o; 17 stdinOnce ? o; 18 tty ? o
core.EphemeralVolumeSource: 1 volumeClaimTemplate core.PersistentVolumeClaimTemplate po
core.EvictionResponder: 1 name s -; 2 priority i p
core.ExecAction: 1 command s ro
core.FCVolumeSource: 1 targetWWNs s ro; 2 lun i po; 3 fsType s o; 4 readOnly ? o; 5 wwids s ro
core.FileKeySelector: 1 volumeName s -; 2 path s -; 3 key s -; 4 optional ? po
core.FlexVolumeSource: 1 driver s -; 2 fsType s o; 3 secretRef core.LocalObjectReference po; 4 readOnly ? o; 5 options {s} o
core.FlockerVolumeSource: 1 datasetName s o; 2 datasetUUID s o
core.GCEPersistentDiskVolumeSource: 1 pdName s -; 2 fsType s o; 3 partition i o; 4 readOnly ? o
core.GRPCAction: 1 port i -; 2 service s p; 3 mode s po
core.GitRepoVolumeSource: 1 repository s -; 2 revision s o; 3 directory s o
core.GlusterfsVolumeSource: 1 endpoints s -; 2 path s -; 3 readOnly ? o
core.HTTPGetAction: 1 path s o; 2 port x -; 3 host s o; 4 scheme s o; 5 httpHeaders core.HTTPHeader ro; 6 protocol s po
core.HTTPHeader: 1 name s -; 2 value s -
core.HostAlias: 1 ip s -; 2 hostnames s ro
core.HostPathVolumeSource: 1 path s -; 2 type s po
core.ISCSIVolumeSource: 1 targetPortal s -; 2 iqn s -; 3 lun i -; 4 iscsiInterface s o; 5 fsType s o; 6 readOnly ? o; 7 portals s ro; 8 chapAuthDiscovery ? o; 11 chapAuthSession ? o; 10 secretRef core.LocalObjectReference po; 12 initiatorName s po
core.ImageVolumeSource: 1 reference s o; 2 pullPolicy s o
core.KeyToPath: 1 key s -; 2 path s -; 3 mode i po; 4 user i po
core.Lifecycle: 1 postStart core.LifecycleHandler po; 2 preStop core.LifecycleHandler po; 3 stopSignal s po
core.LifecycleHandler: 1 exec core.ExecAction po; 2 httpGet core.HTTPGetAction po; 3 tcpSocket core.TCPSocketAction po; 4 sleep core.SleepAction po
core.LoadBalancerIngress: 1 ip s o; 2 hostname s o; 3 ipMode s po; 4 ports core.PortStatus ro
core.LoadBalancerStatus: 1 ingress core.LoadBalancerIngress ro
core.LocalObjectReference: 1 name s o
core.NFSVolumeSource: 1 server s -; 2 path s -; 3 readOnly ? o
core.Namespace: 1 metadata meta.ObjectMeta o; 2 spec core.NamespaceSpec o; 3 status core.NamespaceStatus o
core.NamespaceCondition: 1 type s -; 2 status s -; 4 lastTransitionTime t o; 5 reason s o; 6 message s o
core.NamespaceSpec: 1 finalizers s ro
core.NamespaceStatus: 1 phase s o; 2 conditions core.NamespaceCondition ro
core.NodeAffinity: 1 requiredDuringSchedulingIgnoredDuringExecution core.NodeSelector po; 2 preferredDuringSchedulingIgnoredDuringExecution core.PreferredSchedulingTerm ro
core.NodeSelector: 1 nodeSelectorTerms core.NodeSelectorTerm r
core.NodeSelectorRequirement: 1 key s -; 2 operator s -; 3 values s ro
core.NodeSelectorTerm: 1 matchExpressions core.NodeSelectorRequirement ro; 2 matchFields core.NodeSelectorRequirement ro
core.ObjectFieldSelector: 1 apiVersion s o; 2 fieldPath s -
core.ObjectReference: 1 kind s o; 2 namespace s o; 3 name s o; 4 uid s o; 5 apiVersion s o; 6 resourceVersion s o; 7 fieldPath s o
core.PersistentVolumeClaimSpec: 1 accessModes s ro; 4 selector meta.LabelSelector po; 2 resources core.VolumeResourceRequirements o; 3 volumeName s o; 5 storageClassName s po; 6 volumeMode s po; 7 dataSource core.TypedLocalObjectReference po; 8 dataSourceRef core.TypedObjectReference po; 9 volumeAttributesClassName s po
core.PersistentVolumeClaimTemplate: 1 metadata meta.ObjectMeta o; 2 spec core.PersistentVolumeClaimSpec -
core.PersistentVolumeClaimVolumeSource: 1 claimName s -; 2 readOnly ? o
core.PhotonPersistentDiskVolumeSource: 1 pdID s -; 2 fsType s o
core.PodAffinity: 1 requiredDuringSchedulingIgnoredDuringExecution core.PodAffinityTerm ro; 2 preferredDuringSchedulingIgnoredDuringExecution core.WeightedPodAffinityTerm ro
core.PodAffinityTerm: 1 labelSelector meta.LabelSelector po; 2 namespaces s ro; 3 topologyKey s -; 4 namespaceSelector meta.LabelSelector po; 5 matchLabelKeys s ro; 6 mismatchLabelKeys s ro
core.PodAntiAffinity: 1 requiredDuringSchedulingIgnoredDuringExecution core.PodAffinityTerm ro; 2 preferredDuringSchedulingIgnoredDuringExecution core.WeightedPodAffinityTerm ro
core.PodCertificateProjection: 1 signerName s ro; 2 keyType s ro; 3 maxExpirationSeconds i po; 4 credentialBundlePath s ro; 5 keyPath s ro; 6 certificateChainPath s ro; 7 userAnnotations {s} o; 8 user i po
core.PodDNSConfig: 1 nameservers s ro; 2 searches s ro; 3 options core.PodDNSConfigOption ro
core.PodDNSConfigOption: 1 name s o; 2 value s po
core.PodOS: 1 name s -
core.PodReadinessGate: 1 conditionType s -
core.PodResourceClaim: 1 name s -; 3 resourceClaimName s po; 4 resourceClaimTemplateName s po
core.PodSchedulingGate: 1 name s -
core.PodSchedulingGroup: 1 podGroupName s po
core.PodSecurityContext: 1 seLinuxOptions core.SELinuxOptions po; 8 windowsOptions core.WindowsSecurityContextOptions po; 2 runAsUser i po; 6 runAsGroup i po; 3 runAsNonRoot ? po; 4 supplementalGroups i ro; 12 supplementalGroupsPolicy s po; 5 fsGroup i po; 7 sysctls core.Sysctl ro; 9 fsGroupChangePolicy s po; 10 seccompProfile core.SeccompProfile po; 11 appArmorProfile core.AppArmorProfile po; 13 seLinuxChangePolicy s po
core.PodSpec: 1 volumes core.Volume ro; 20 initContainers core.Container ro; 2 containers core.Container r; 34 ephemeralContainers core.EphemeralContainer ro; 3 restartPolicy s o; 4 terminationGracePeriodSeconds i po; 5 activeDeadlineSeconds i po; 6 dnsPolicy s o; 7 nodeSelector {s} o; 8 serviceAccountName s o; 9 serviceAccount s o; 21 automountServiceAccountToken ? po; 10 nodeName s o; 11 hostNetwork ? o; 12 hostPID ? o; 13 hostIPC ? o; 27 shareProcessNamespace ? po; 14 securityContext core.PodSecurityContext po; 15 imagePullSecrets core.LocalObjectReference ro; 16 hostname s o; 17 subdomain s o; 18 affinity core.Affinity po; 19 schedulerName s o; 22 tolerations core.Toleration ro; 23 hostAliases core.HostAlias ro; 24 priorityClassName s o; 25 priority i po; 26 dnsConfig core.PodDNSConfig po; 28 readinessGates core.PodReadinessGate ro; 29 runtimeClassName s po; 30 enableServiceLinks ? po; 31 preemptionPolicy s po; 32 overhead {q} o; 33 topologySpreadConstraints core.TopologySpreadConstraint ro; 35 setHostnameAsFQDN ? po; 36 os core.PodOS po; 37 hostUsers ? po; 38 schedulingGates core.PodSchedulingGate ro; 39 resourceClaims core.PodResourceClaim ro; 40 resources core.ResourceRequirements po; 41 hostnameOverride s po; 43 schedulingGroup core.PodSchedulingGroup po; 44 evictionResponders core.EvictionResponder ro
core.PodTemplateSpec: 1 metadata meta.ObjectMeta o; 2 spec core.PodSpec o
core.PortStatus: 1 port i -; 2 protocol s -; 3 error s po
core.PortworxVolumeSource: 1 volumeID s -; 2 fsType s o; 3 readOnly ? o
core.PreferredSchedulingTerm: 1 weight i -; 2 preference core.NodeSelectorTerm -
core.Probe: 1 - core.ProbeHandler l; 2 initialDelaySeconds i o; 3 timeoutSeconds i o; 4 periodSeconds i o; 5 successThreshold i o; 6 failureThreshold i o; 7 terminationGracePeriodSeconds i po
core.ProbeHandler: 1 exec core.ExecAction po; 2 httpGet core.HTTPGetAction po; 3 tcpSocket core.TCPSocketAction po; 4 grpc core.GRPCAction po
core.ProjectedVolumeSource: 1 sources core.VolumeProjection r; 2 defaultMode i po; 3 defaultUser i po
core.QuobyteVolumeSource: 1 registry s -; 2 volume s -; 3 readOnly ? o; 4 user s o; 5 group s o; 6 tenant s o
core.RBDVolumeSource: 1 monitors s r; 2 image s -; 3 fsType s o; 4 pool s o; 5 user s o; 6 keyring s o; 7 secretRef core.LocalObjectReference po; 8 readOnly ? o
core.ResourceClaim: 1 name s -; 2 request s o
core.ResourceFieldSelector: 1 containerName s o; 2 resource s -; 3 divisor q o
core.ResourceRequirements: 1 limits {q} o; 2 requests {q} o; 3 claims core.ResourceClaim ro
core.SELinuxOptions: 1 user s o; 2 role s o; 3 type s o; 4 level s o
core.ScaleIOVolumeSource: 1 gateway s -; 2 system s -; 3 secretRef core.LocalObjectReference p; 4 sslEnabled ? o; 5 protectionDomain s o; 6 storagePool s o; 7 storageMode s o; 8 volumeName s o; 9 fsType s o; 10 readOnly ? o
core.SeccompProfile: 1 type s -; 2 localhostProfile s po
core.Secret: 1 metadata meta.ObjectMeta o; 5 immutable ? po; 2 data {b} o; 4 stringData {s} o; 3 type s o
core.SecretEnvSource: 1 - core.LocalObjectReference l; 2 optional ? po
core.SecretKeySelector: 1 - core.LocalObjectReference l; 2 key s -; 3 optional ? po
core.SecretProjection: 1 - core.LocalObjectReference l; 2 items core.KeyToPath ro; 4 optional ? po
core.SecretVolumeSource: 1 secretName s o; 2 items core.KeyToPath ro; 3 defaultMode i po; 4 optional ? po; 5 defaultUser i po
core.SecurityContext: 1 capabilities core.Capabilities po; 2 privileged ? po; 3 seLinuxOptions core.SELinuxOptions po; 10 windowsOptions core.WindowsSecurityContextOptions po; 4 runAsUser i po; 8 runAsGroup i po; 5 runAsNonRoot ? po; 6 readOnlyRootFilesystem ? po; 7 allowPrivilegeEscalation ? po; 9 procMount s po; 11 seccompProfile core.SeccompProfile po; 12 appArmorProfile core.AppArmorProfile po
core.Service: 1 metadata meta.ObjectMeta o; 2 spec core.ServiceSpec o; 3 status core.ServiceStatus o
core.ServiceAccount: 1 metadata meta.ObjectMeta o; 2 secrets core.ObjectReference ro; 3 imagePullSecrets core.LocalObjectReference ro; 4 automountServiceAccountToken ? po
core.ServiceAccountTokenProjection: 1 audience s ro; 2 expirationSeconds i po; 3 path s -; 4 user i po
core.ServicePort: 1 name s o; 2 protocol s o; 6 appProtocol s po; 3 port i -; 4 targetPort x o; 5 nodePort i o
core.ServiceSpec: 1 ports core.ServicePort ro; 2 selector {s} o; 3 clusterIP s o; 18 clusterIPs s ro; 4 type s o; 5 externalIPs s ro; 7 sessionAffinity s o; 8 loadBalancerIP s o; 9 loadBalancerSourceRanges s ro; 10 externalName s o; 11 externalTrafficPolicy s o; 12 healthCheckNodePort i o; 13 publishNotReadyAddresses ? o; 14 sessionAffinityConfig core.SessionAffinityConfig po; 19 ipFamilies s ro; 17 ipFamilyPolicy s po; 20 allocateLoadBalancerNodePorts ? po; 21 loadBalancerClass s po; 22 internalTrafficPolicy s po; 23 trafficDistribution s po
core.ServiceStatus: 1 loadBalancer core.LoadBalancerStatus o; 2 conditions meta.Condition ro
core.SessionAffinityConfig: 1 clientIP core.ClientIPConfig po
core.SleepAction: 1 seconds i -
core.StorageOSVolumeSource: 1 volumeName s o; 2 volumeNamespace s o; 3 fsType s o; 4 readOnly ? o; 5 secretRef core.LocalObjectReference po
core.Sysctl: 1 name s -; 2 value s -
core.TCPSocketAction: 1 port x -; 2 host s o
core.Toleration: 1 key s o; 2 operator s o; 3 value s o; 4 effect s o; 5 tolerationSeconds i po
core.TopologySpreadConstraint: 1 maxSkew i -; 2 topologyKey s -; 3 whenUnsatisfiable s -; 4 labelSelector meta.LabelSelector po; 5 minDomains i po; 6 nodeAffinityPolicy s po; 7 nodeTaintsPolicy s po; 8 matchLabelKeys s ro
core.TypedLocalObjectReference: 1 apiGroup s p; 2 kind s -; 3 name s -
core.TypedObjectReference: 1 apiGroup s p; 2 kind s -; 3 name s -; 4 namespace s po
core.Volume: 1 name s -; 2 - core.VolumeSource l
core.VolumeDevice: 1 name s -; 2 devicePath s -
core.VolumeMount: 1 name s -; 2 readOnly ? o; 7 recursiveReadOnly s po; 3 mountPath s -; 4 subPath s o; 5 mountPropagation s po; 6 subPathExpr s o; 8 bindMountOptions s ro
core.VolumeProjection: 1 secret core.SecretProjection po; 2 downwardAPI core.DownwardAPIProjection po; 3 configMap core.ConfigMapProjection po; 4 serviceAccountToken core.ServiceAccountTokenProjection po; 5 clusterTrustBundle core.ClusterTrustBundleProjection po; 6 podCertificate core.PodCertificateProjection po
core.VolumeResourceRequirements: 1 limits {q} o; 2 requests {q} o
core.VolumeSource: 1 hostPath core.HostPathVolumeSource po; 2 emptyDir core.EmptyDirVolumeSource po; 3 gcePersistentDisk core.GCEPersistentDiskVolumeSource po; 4 awsElasticBlockStore core.AWSElasticBlockStoreVolumeSource po; 5 gitRepo core.GitRepoVolumeSource po; 6 secret core.SecretVolumeSource po; 7 nfs core.NFSVolumeSource po; 8 iscsi core.ISCSIVolumeSource po; 9 glusterfs core.GlusterfsVolumeSource po; 10 persistentVolumeClaim core.PersistentVolumeClaimVolumeSource po; 11 rbd core.RBDVolumeSource po; 12 flexVolume core.FlexVolumeSource po; 13 cinder core.CinderVolumeSource po; 14 cephfs core.CephFSVolumeSource po; 15 flocker core.FlockerVolumeSource po; 16 downwardAPI core.DownwardAPIVolumeSource po; 17 fc core.FCVolumeSource po; 18 azureFile core.AzureFileVolumeSource po; 19 configMap core.ConfigMapVolumeSource po; 20 vsphereVolume core.VsphereVirtualDiskVolumeSource po; 21 quobyte core.QuobyteVolumeSource po; 22 azureDisk core.AzureDiskVolumeSource po; 23 photonPersistentDisk core.PhotonPersistentDiskVolumeSource po; 26 projected core.ProjectedVolumeSource po; 24 portworxVolume core.PortworxVolumeSource po; 25 scaleIO core.ScaleIOVolumeSource po; 27 storageos core.StorageOSVolumeSource po; 28 csi core.CSIVolumeSource po; 29 ephemeral core.EphemeralVolumeSource po; 30 image core.ImageVolumeSource po
core.VsphereVirtualDiskVolumeSource: 1 volumePath s -; 2 fsType s o; 3 storagePolicyName s o; 4 storagePolicyID s o
core.WeightedPodAffinityTerm: 1 weight i -; 2 podAffinityTerm core.PodAffinityTerm -
core.WindowsSecurityContextOptions: 1 gmsaCredentialSpecName s po; 2 gmsaCredentialSpec s po; 3 runAsUserName s po; 4 hostProcess ? po
meta.Condition: 1 type s -; 2 status s -; 3 observedGeneration i o; 4 lastTransitionTime t -; 5 reason s -; 6 message s -
meta.FieldSelectorRequirement: 1 key s -; 2 operator s -; 3 values s ro
meta.LabelSelector: 1 matchLabels {s} o; 2 matchExpressions meta.LabelSelectorRequirement ro
meta.LabelSelectorRequirement: 1 key s -; 2 operator s -; 3 values s ro
meta.ManagedFieldsEntry: 1 manager s o; 2 operation s o; 3 apiVersion s o; 4 time t po; 6 fieldsType s o; 7 fieldsV1 fv po; 8 subresource s o
meta.ObjectMeta: 1 name s o; 2 generateName s o; 3 namespace s o; 4 selfLink s o; 5 uid s o; 6 resourceVersion s o; 7 generation i o; 8 creationTimestamp t o; 9 deletionTimestamp t po; 10 deletionGracePeriodSeconds i po; 11 labels {s} o; 12 annotations {s} o; 13 ownerReferences meta.OwnerReference ro; 14 finalizers s ro; 17 managedFields meta.ManagedFieldsEntry ro
meta.OwnerReference: 5 apiVersion s -; 1 kind s -; 3 name s -; 4 uid s -; 6 controller ? po; 7 blockOwnerDeletion ? po
rbac.AggregationRule: 1 clusterRoleSelectors meta.LabelSelector ro
rbac.ClusterRole: 1 metadata meta.ObjectMeta o; 2 rules rbac.PolicyRule r; 3 aggregationRule rbac.AggregationRule po
rbac.ClusterRoleBinding: 1 metadata meta.ObjectMeta o; 2 subjects rbac.Subject ro; 3 roleRef rbac.RoleRef -
rbac.PolicyRule: 1 verbs s r; 2 apiGroups s ro; 3 resources s ro; 4 resourceNames s ro; 5 nonResourceURLs s ro
rbac.Role: 1 metadata meta.ObjectMeta o; 2 rules rbac.PolicyRule r
rbac.RoleBinding: 1 metadata meta.ObjectMeta o; 2 subjects rbac.Subject ro; 3 roleRef rbac.RoleRef -
rbac.RoleRef: 1 apiGroup s -; 2 kind s -; 3 name s -
rbac.Subject: 1 kind s -; 2 apiGroup s o; 3 name s -; 4 namespace s o
"""


class DecodeError(ValueError):
    """A malformed body: the message names the field or the offset."""


class UnsupportedKind(DecodeError):
    """A kind the table has no message for."""


def _parse_table(text):
    out = {}
    for line in text.strip().splitlines():
        name, _, rest = line.partition(": ")
        fields = {}
        for f in rest.split("; "):
            num, json_name, typ, flags = f.split(" ")
            fields[int(num)] = (json_name, typ, "" if flags == "-" else flags)
        out[name] = fields
    return out


_TABLE = _parse_table(MESSAGES)


def _varint(b, i):
    v, shift = 0, 0
    while True:
        if i >= len(b):
            raise DecodeError("truncated varint at offset %d" % i)
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        if not c & 0x80:
            return v, i
        shift += 7
        if shift > 63:
            raise DecodeError("varint too long at offset %d" % i)


def _varint_at(b, i, where, f):
    try:
        return _varint(b, i)
    except DecodeError as e:
        raise DecodeError("%s: field %d: %s" % (where, f, e))


def fields(b, where="body"):
    """[(number, wire type, value)] of one message (`where` names it in errors): ints for varints, bytes otherwise."""
    i, out = 0, []
    while i < len(b):
        at = i
        try:
            key, i = _varint(b, i)
        except DecodeError as e:
            raise DecodeError("%s: %s" % (where, e))
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint_at(b, i, where, f)
        elif wt == 2:
            n, i = _varint_at(b, i, where, f)
            if i + n > len(b):
                raise DecodeError("%s: field %d at offset %d: length %d runs past the end" % (where, f, at, n))
            v = b[i:i + n]
            i += n
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise DecodeError("%s: field %d at offset %d: wire type %d" % (where, f, at, wt))
        if i > len(b):
            raise DecodeError("%s: field %d at offset %d runs past the end" % (where, f, at))
        out.append((f, wt, v))
    return out


def _int(v, where):
    if isinstance(v, bytes):
        raise DecodeError("%s: a varint expected" % where)
    return v - (1 << 64) if v >= 1 << 63 else v


def _str(v, where):
    if not isinstance(v, bytes):
        raise DecodeError("%s: a length-delimited value expected" % where)
    try:
        return v.decode()
    except UnicodeDecodeError:
        raise DecodeError("%s: invalid UTF-8" % where)


def _time(v, where):
    secs = 0
    for f, _wt, x in fields(v, where):
        if f == 1:
            secs = _int(x, where + ".seconds")
    if not v or secs == -62135596800:       # Go's zero time: JSON null
        return None
    return datetime.datetime.fromtimestamp(secs, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _scalar(typ, v, where):
    if typ == "s":
        return _str(v, where)
    if typ == "b":
        return base64.b64encode(v).decode()
    if typ == "i":
        return _int(v, where)
    if typ == "?":
        return bool(_int(v, where))
    if typ == "t":
        return _time(v, where)
    if typ == "q":
        return "".join(_str(x, where) for f, _wt, x in fields(v) if f == 1)
    if typ == "x":
        d = {f: x for f, _wt, x in fields(v)}
        return _str(d.get(3, b""), where) if _int(d.get(1, 0), where) == 1 else _int(d.get(2, 0), where)
    if typ == "fv":
        raw = b"".join(x for f, _wt, x in fields(v) if f == 1)
        try:
            return json.loads(raw or b"{}")
        except ValueError as e:
            raise DecodeError("%s: %s" % (where, e))
    return message(typ, v, where)


def message(name, b, where):
    """One message as the JSON encoding/json would give of its Go type."""
    table = _TABLE.get(name)
    if table is None:
        raise DecodeError("%s: no schema for %s" % (where, name))
    out = {}
    for f, wt, v in fields(b, where):
        spec = table.get(f)
        if spec is None:
            continue
        json_name, typ, flags = spec
        at = "%s.%s" % (where, json_name) if json_name != "-" else where
        if typ.startswith("{"):
            entry = {k: x for k, _wt, x in fields(v, at)}
            key = _str(entry.get(1, b""), at + " key")
            out.setdefault(json_name, {})[key] = _scalar(typ[1:-1], entry.get(2, b""), "%s[%s]" % (at, key))
        elif "r" in flags:
            if wt == 2 and typ in ("i", "?"):       # packed
                i, vals = 0, []
                while i < len(v):
                    x, i = _varint(v, i)
                    vals.append(_scalar(typ, x, at))
                out.setdefault(json_name, []).extend(vals)
            else:
                out.setdefault(json_name, []).append(_scalar(typ, v, at))
        elif "l" in flags:
            out.update(_scalar(typ, v, at))
        else:
            out[json_name] = _scalar(typ, v, at)
    for json_name, typ, flags in table.values():   # encoding/json's omitempty on what the wire always carries
        if json_name in out and "o" in flags and "p" not in flags and typ in ("s", "i", "?") and out[json_name] in ("", 0, False):
            del out[json_name]
    return out


def decode(body):
    """A whole request body -> the object as JSON would carry it."""
    if body[:4] != b"k8s\x00":
        raise DecodeError("missing the protobuf magic k8s\\0 at offset 0")
    unk = {f: v for f, _wt, v in fields(body[4:], "runtime.Unknown")}
    tm = {f: v for f, _wt, v in fields(unk.get(1, b""), "typeMeta")}
    api_version, kind = _str(tm.get(1, b""), "typeMeta.apiVersion"), _str(tm.get(2, b""), "typeMeta.kind")
    name = KINDS.get((api_version, kind))
    if name is None:
        raise UnsupportedKind("protobuf body for %s %s is not supported by the stand-in" % (api_version, kind))
    obj = {"apiVersion": api_version, "kind": kind}
    obj.update(message(name, unk.get(2, b""), kind))
    return obj
