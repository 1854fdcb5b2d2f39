import type { PolicyManifest } from './manifest-schemas.js';

export type PolicyTarget = 'tool' | 'context' | 'node';

export interface PolicyDenial {
  policy: string;
  target: PolicyTarget;
  targetId: string;
  reason: string | undefined;
}

/**
 * Evaluates `policy.yaml`. Everything is allowed unless an enabled rule denies it; a deny rule wins over
 * any allow rule for the same target (an allow only documents intent). `target_id: "*"` matches every id.
 */
export interface PolicyEvaluator {
  check(target: PolicyTarget, targetId: string): PolicyDenial | undefined;
}

export function createPolicyEvaluator(manifest: PolicyManifest): PolicyEvaluator {
  const denials = new Map<string, PolicyDenial>();
  for (const policy of manifest.policies) {
    if (!policy.enabled) continue;
    for (const rule of policy.rules) {
      if (rule.action !== 'deny') continue;
      const key = `${rule.target}:${rule.target_id}`;
      if (!denials.has(key)) {
        denials.set(key, {
          policy: policy.name,
          target: rule.target,
          targetId: rule.target_id,
          reason: rule.reason,
        });
      }
    }
  }
  return {
    check(target, targetId) {
      if (denials.size === 0) return undefined;
      const exact = denials.get(`${target}:${targetId}`) ?? denials.get(`${target}:*`);
      return exact ? { ...exact, targetId } : undefined;
    },
  };
}

export function isToolDenied(manifest: PolicyManifest, toolId: string): PolicyDenial | undefined {
  return createPolicyEvaluator(manifest).check('tool', toolId);
}
