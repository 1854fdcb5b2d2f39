import { z } from 'zod';
import type { EngageContextOptions, EngageLimits, EngageOptions } from './types.js';

/** The `engage:` section of agentd.yaml (snake_case names, as in the other sections). */
export const engageConfigSchema = z.object({
  max_turns: z.number().int().positive().default(50),
  /** false forces sequential tool execution, like max_parallel_tools: 1. */
  parallel_tool_execution: z.boolean().default(true),
  max_parallel_tools: z.number().int().positive().default(8),
  compact_threshold: z.number().gt(0).max(1).default(0.7),
  compact_keep_recent: z.number().int().min(0).default(10),
  /** 0 turns the nudge off. */
  ledger_nudge_interval: z.number().int().min(0).default(5),
  truncate_closed_blocks: z.boolean().default(true),
  token_budget: z.number().int().positive().optional(),
  cost_budget_usd: z.number().positive().optional(),
  max_tool_result_chars: z.number().int().positive().default(50_000),
  model_timeout_ms: z.number().int().positive().optional(),
  skills: z
    .object({
      auto_activate: z.boolean().default(true),
      max_auto_activated: z.number().int().min(0).default(5),
      max_skill_prompt_tokens: z.number().int().positive().default(4000),
    })
    .prefault({}),
});

export type EngageConfig = z.output<typeof engageConfigSchema>;

/** Maps the config section onto `runEngage` options. */
export function engageOptionsFromConfig(config: EngageConfig): {
  limits: EngageLimits;
  context: EngageContextOptions;
  modelCallOptions: NonNullable<EngageOptions['modelCallOptions']>;
  skills: { autoActivate: boolean; maxAutoActivated: number; maxSkillPromptTokens: number };
} {
  return {
    limits: {
      maxTurns: config.max_turns,
      maxParallelTools: config.parallel_tool_execution ? config.max_parallel_tools : 1,
      maxToolResultChars: config.max_tool_result_chars,
      ...(config.token_budget !== undefined ? { tokenBudget: config.token_budget } : {}),
      ...(config.cost_budget_usd !== undefined ? { costBudgetUsd: config.cost_budget_usd } : {}),
    },
    context: {
      compactThreshold: config.compact_threshold,
      compactKeepRecent: config.compact_keep_recent,
      ledgerNudgeInterval: config.ledger_nudge_interval,
      truncateClosedBlocks: config.truncate_closed_blocks,
    },
    modelCallOptions: config.model_timeout_ms !== undefined ? { timeoutMs: config.model_timeout_ms } : {},
    skills: {
      autoActivate: config.skills.auto_activate,
      maxAutoActivated: config.skills.max_auto_activated,
      maxSkillPromptTokens: config.skills.max_skill_prompt_tokens,
    },
  };
}
