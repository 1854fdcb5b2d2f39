import { estimateTokens, type ModelToolDefinition, type StreamModelOptions } from '../model/index.js';
import type { ToolRegistry } from '../tools/index.js';
import { type ContextWindow, createContextWindow } from './context-window.js';
import type { RunState } from './run-state.js';

/** What the run fixes before its first turn: the context window, the tools on offer, call options. */
export interface RunSetup {
  readonly window: ContextWindow;
  readonly registry: NonNullable<RunState['options']['tools']>['registry'] | undefined;
  readonly allowedNames: ReadonlySet<string>;
  readonly modelTools: readonly ModelToolDefinition[];
  /** Tokens the tool definitions add to every request. */
  readonly overheadTokens: number;
  /** The ledger nudge applies only when the model can write the ledger. */
  readonly canWriteLedger: boolean;
  /** Above this the context is compacted. */
  readonly maxContextTokens: number;
  readonly streamOptions: StreamModelOptions;
}

/** The last overhead measured per registry, with the definitions it was measured on. */
const overheads = new WeakMap<ToolRegistry, { tools: readonly ModelToolDefinition[]; tokens: number }>();

/**
 * Tokens the tool definitions add to every request. Registries keep their definitions, so runs offering
 * the same tools reuse the figure instead of serialising every schema again only to measure it.
 */
function toolOverheadTokens(registry: ToolRegistry, tools: readonly ModelToolDefinition[]): number {
  const last = overheads.get(registry);
  if (
    last &&
    (last.tools === tools ||
      (last.tools.length === tools.length && last.tools.every((tool, index) => tool === tools[index])))
  )
    return last.tokens;
  const tokens = tools.length ? estimateTokens(JSON.stringify(tools)) : 0;
  overheads.set(registry, { tools, tokens });
  return tokens;
}

/**
 * Builds the context window from the caller's messages (leading system messages become the system prompt),
 * adds the orientation and the skill catalog, and activates skills the task message triggers.
 */
export async function prepareRun(state: RunState): Promise<RunSetup> {
  const { options, contextOptions, scope } = state;
  let leading = 0;
  while (leading < options.messages.length && options.messages[leading]!.role === 'system') leading++;
  // One system message (a chat turn's) is taken as it is: joining copies kilobytes of prompt every run.
  const system =
    leading === 1
      ? options.messages[0]!.content
      : options.messages
          .slice(0, leading)
          .map((message) => message.content)
          .join('\n\n');
  const history = options.messages.slice(leading);
  const extras = [...(options.systemPromptExtras ?? [])];
  if (contextOptions.orient) extras.push(`== ORIENT ==\n${contextOptions.orient}`);

  const registry = options.tools?.registry;
  const names = options.tools?.names;
  const allowedNames: ReadonlySet<string> = registry
    ? names
      ? new Set(names)
      : registry.names()
    : new Set<string>();
  const modelTools = registry ? registry.toModelTools(names ? allowedNames : undefined) : [];
  const overheadTokens = registry ? toolOverheadTokens(registry, modelTools) : 0;
  const canWriteLedger = allowedNames.has('ledger_append') && options.ledger !== undefined;

  const skills = options.skills;
  if (skills && skills.catalog !== false) {
    const catalog = await skills.library.catalog();
    if (catalog) extras.push(catalog);
  }
  const window = createContextWindow({
    system,
    systemExtras: extras,
    history,
    truncateClosedBlocks: contextOptions.truncateClosedBlocks,
  });
  if (skills && skills.autoActivate !== false) {
    const task = window.taskMessage();
    if (task) {
      const activated = await skills.library.autoActivate(task.content, {
        runId: scope.runId,
        agentId: scope.agentId,
        workItemId: scope.workItemId,
        ...(skills.maxAutoActivated !== undefined ? { maxSkills: skills.maxAutoActivated } : {}),
        ...(skills.maxSkillPromptTokens !== undefined ? { maxTokens: skills.maxSkillPromptTokens } : {}),
      });
      for (const skill of activated) window.setSkill(skill.name, skill.body);
    }
  }
  state.activeSkills = window.activeSkills();

  return {
    window,
    registry,
    allowedNames,
    modelTools,
    overheadTokens,
    canWriteLedger,
    maxContextTokens: Math.floor(options.model.contextWindowTokens * contextOptions.compactThreshold),
    streamOptions: streamOptionsOf(state),
  };
}

/**
 * The options of the run's model calls. They follow the caller's signal itself, not the run's own: model
 * calls keep one listener per signal for all of them and take themselves off its list when they end, so
 * nothing of theirs stays on a caller's signal that outlives the run. A run without a caller's signal gives
 * its model calls none: nothing could abort them.
 */
function streamOptionsOf(state: RunState): StreamModelOptions {
  const { options, logger } = state;
  const streamOptions: StreamModelOptions = { logger };
  if (state.callerSignal) streamOptions.signal = state.callerSignal;
  const callOptions = options.modelCallOptions;
  if (callOptions?.timeoutMs !== undefined) streamOptions.timeoutMs = callOptions.timeoutMs;
  if (callOptions?.retry) streamOptions.retry = callOptions.retry;
  return streamOptions;
}
