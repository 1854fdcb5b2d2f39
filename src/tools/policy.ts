import { z } from 'zod';

/**
 * The `policy.yaml` shape of workflows, extended with `agent` and `resource` patterns:
 *
 * ```yaml
 * default_action: allow
 * policies:
 *   - name: no-shell-for-guests
 *     rules:
 *       - { target: tool, target_id: bash, agent: "guest-*", action: deny, reason: guests get no shell }
 *       - { target: tool, target_id: write_file, resource: "secrets/*", action: deny }
 * ```
 */
const ruleSchema = z.object({
  target: z.enum(['tool', 'context', 'node']).default('tool'),
  /** Glob over the tool (or context / node) id. */
  target_id: z.string().min(1).default('*'),
  /** Glob over the agent id; every agent when omitted. */
  agent: z.string().min(1).optional(),
  /** Glob over what the call acts on (workspace path, URL host, command); any when omitted. */
  resource: z.string().min(1).optional(),
  /** `ask`: run only when the person driving the session approves this call (see ToolApprover). */
  action: z.enum(['allow', 'deny', 'ask']),
  reason: z.string().optional(),
});

export const policyConfigSchema = z.object({
  /** What happens when no rule matches. */
  default_action: z.enum(['allow', 'deny', 'ask']).default('allow'),
  policies: z
    .array(
      z.object({
        name: z.string().min(1),
        enabled: z.boolean().default(true),
        rules: z.array(ruleSchema).default([]),
      }),
    )
    .default([]),
});

export type PolicyConfig = z.input<typeof policyConfigSchema>;

export interface PolicyRequest {
  target?: 'tool' | 'context' | 'node';
  targetId: string;
  agentId?: string;
  resource?: string;
}

export interface PolicyDecision {
  allowed: boolean;
  /** Allowed only once someone approves the call; a run with nobody to ask treats it as denied. */
  ask?: true;
  /** Why a call was denied: the rule's reason, or a generated one. */
  reason?: string;
  /** `policyName#ruleIndex` of the deciding rule; absent when the default action decided. */
  rule?: string;
}

export interface Policy {
  check(request: PolicyRequest): PolicyDecision;
}

function globToRegExp(glob: string): RegExp {
  const escaped = glob
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${escaped}$`);
}

interface CompiledRule {
  id: string;
  target: 'tool' | 'context' | 'node';
  targetId: RegExp;
  agent: RegExp | undefined;
  resource: RegExp | undefined;
  action: 'allow' | 'deny' | 'ask';
  reason: string | undefined;
}

/**
 * Deny wins, then ask: a call is denied when any matching rule denies it, needs approval when a rule asks
 * and none denies, is allowed when a rule allows it and none denies or asks, and otherwise gets
 * `default_action`. Order therefore never changes the outcome, which keeps
 * policies from several files composable. A rule with a `resource` pattern never matches a call that has
 * no resource. `*` in a pattern matches any characters, `/` included.
 */
export function createPolicy(config: PolicyConfig = {}): Policy {
  const parsed = policyConfigSchema.parse(config);
  const rules: CompiledRule[] = [];
  for (const policy of parsed.policies) {
    if (!policy.enabled) continue;
    policy.rules.forEach((rule, index) => {
      rules.push({
        id: `${policy.name}#${index}`,
        target: rule.target,
        targetId: globToRegExp(rule.target_id),
        agent: rule.agent === undefined ? undefined : globToRegExp(rule.agent),
        resource: rule.resource === undefined ? undefined : globToRegExp(rule.resource),
        action: rule.action,
        reason: rule.reason,
      });
    });
  }

  return {
    check(request) {
      const target = request.target ?? 'tool';
      let allowRule: CompiledRule | undefined;
      let askRule: CompiledRule | undefined;
      for (const rule of rules) {
        if (rule.target !== target || !rule.targetId.test(request.targetId)) continue;
        if (rule.agent && (request.agentId === undefined || !rule.agent.test(request.agentId))) continue;
        if (rule.resource && (request.resource === undefined || !rule.resource.test(request.resource)))
          continue;
        if (rule.action === 'deny') {
          return {
            allowed: false,
            reason: rule.reason ?? `denied by policy rule ${rule.id}`,
            rule: rule.id,
          };
        }
        if (rule.action === 'ask') askRule ??= rule;
        else allowRule ??= rule;
      }
      if (askRule)
        return {
          allowed: true,
          ask: true,
          reason: askRule.reason ?? `policy rule ${askRule.id} asks first`,
          rule: askRule.id,
        };
      if (allowRule) return { allowed: true, rule: allowRule.id };
      if (parsed.default_action === 'allow') return { allowed: true };
      if (parsed.default_action === 'ask') return { allowed: true, ask: true, reason: 'default_action: ask' };
      return {
        allowed: false,
        reason: `no policy rule allows ${target} "${request.targetId}" (default_action: deny)`,
      };
    },
  };
}
