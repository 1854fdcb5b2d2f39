import type { Ledger, LedgerEntry, LedgerEntryType } from '../ledger/index.js';
import {
  completeModel,
  estimateTokens,
  type LanguageModel,
  type ModelMessage,
  type ModelUsage,
  type StreamModelOptions,
} from '../model/index.js';
import type { Logger } from '../util/index.js';
import { type ContextWindow, pairSafeTail } from './context-window.js';

export interface CompactionReport {
  trigger: 'threshold' | 'emergency';
  tokensBefore: number;
  tokensAfter: number;
  messagesBefore: number;
  messagesAfter: number;
  ledgerEntriesUsed: number;
  /** Tokens the emergency summarisation call used (zero for ledger compaction). */
  usage: ModelUsage;
}

export interface CompactionOptions {
  window: ContextWindow;
  /** Context budget in tokens: compactThreshold × the model's window. */
  maxTokens: number;
  /** Tokens the request costs besides its messages (tool definitions). */
  overheadTokens: number;
  keepRecent: number;
  /** Fewer ledger entries than this count as "too thin": the model summarises instead. */
  minLedgerEntries: number;
  ledger: Ledger | undefined;
  workItemId: string;
  model: LanguageModel;
  modelCallOptions: StreamModelOptions;
  logger: Logger;
}

const ledgerHeader = '=== WORK LEDGER ===';

const groupTitles: Array<[LedgerEntryType, string]> = [
  ['plan', 'PLAN (latest)'],
  ['finding', 'FINDINGS'],
  ['step', 'STEPS COMPLETED'],
  ['decision', 'DECISIONS'],
  ['error', 'ERRORS'],
  ['note', 'NOTES'],
];

/**
 * The `=== WORK LEDGER ===` message: entries grouped by type, only the latest plan, each group cut to its
 * newest entries when the whole would exceed `maxChars`.
 */
export function formatLedgerForContext(entries: ReadonlyArray<LedgerEntry>, maxChars: number): string {
  const groups = new Map<LedgerEntryType, LedgerEntry[]>();
  for (const entry of entries) {
    const list = groups.get(entry.entryType) ?? [];
    list.push(entry);
    groups.set(entry.entryType, list);
  }
  const plans = groups.get('plan');
  if (plans) groups.set('plan', plans.slice(-1));
  const present = groupTitles.filter(([type]) => groups.has(type));
  const perGroup = Math.max(200, Math.floor(maxChars / Math.max(1, present.length)));
  const sections: string[] = [
    ledgerHeader,
    'Your ledger for this work so far (older messages were compacted away):',
  ];
  for (const [type, title] of present) {
    const list = groups.get(type)!;
    const lines: string[] = [];
    let used = 0;
    for (let index = list.length - 1; index >= 0; index--) {
      const entry = list[index]!;
      const line = `[${entry.seq}] ${entry.content.replace(/\s+/g, ' ').trim()}`;
      if (used + line.length > perGroup && lines.length > 0) {
        lines.unshift(`(${index + 1} earlier ${type} entries omitted; use ledger_read to see them)`);
        break;
      }
      lines.unshift(line);
      used += line.length + 1;
    }
    sections.push(`${title}:`, ...lines);
  }
  return sections.join('\n');
}

const summarizerPrompt =
  'You compress the working context of an AI agent that is in the middle of a task. Summarise the messages ' +
  'below so the agent can continue without them: the goal, what was done, facts learned (names, paths, numbers, ' +
  'ids), decisions and why, errors, and what remains. Be concise and factual; do not invent anything.';

function renderForSummary(messages: ReadonlyArray<ModelMessage>, maxChars: number): string {
  const lines: string[] = [];
  let used = 0;
  // Newest first so that, when the budget runs out, the oldest messages are the ones left out.
  for (let index = messages.length - 1; index >= 0; index--) {
    const message = messages[index]!;
    let text = message.content.length > 2000 ? `${message.content.slice(0, 2000)}…` : message.content;
    if (message.role === 'assistant' && message.toolCalls?.length) {
      text += ` [called ${message.toolCalls.map((call) => `${call.name}(${JSON.stringify(call.arguments).slice(0, 200)})`).join(', ')}]`;
    }
    const line = message.role === 'tool' ? `tool ${message.toolName} → ${text}` : `${message.role}: ${text}`;
    if (used + line.length > maxChars) {
      lines.unshift(`(${index + 1} older messages not shown)`);
      break;
    }
    lines.unshift(line);
    used += line.length + 1;
  }
  return lines.join('\n');
}

/** Whether the context, with what the request adds to it, is above the budget that triggers compaction. */
export function overContextBudget(window: ContextWindow, maxTokens: number, overheadTokens: number): boolean {
  return window.measure().tokens + overheadTokens > maxTokens;
}

/**
 * Layers 2 and 3 of compaction, run before a model call when the context is above the budget.
 * Layer 2 rebuilds from the ledger: [system] + [task] + [ledger] + the recent messages (the whole open block
 * when that fits, else the last `keepRecent`). Layer 3, when the ledger is too thin or that still does not
 * fit: the model summarises what is dropped. Tool calls and their results are never separated.
 */
export async function compactIfNeeded(options: CompactionOptions): Promise<CompactionReport | undefined> {
  const { window, maxTokens, overheadTokens } = options;
  if (!overContextBudget(window, maxTokens, overheadTokens)) return undefined;
  const before = window.measure();
  const tokensBefore = before.tokens + overheadTokens;

  const system = window.systemPrompt();
  const systemMessages: ModelMessage[] = system === '' ? [] : [{ role: 'system', content: system }];
  const measure = (head: ModelMessage[], tail: ModelMessage[]) =>
    estimateTokens([...systemMessages, ...head, ...tail]) + overheadTokens;
  const task = window.taskMessage();
  const taskMessages: ModelMessage[] = task ? [task] : [];
  const runMessages = window.blockMessages();
  const entries = options.ledger ? await options.ledger.read(options.workItemId) : [];
  // The ledger may use up to a third of the budget; the rest is for the system prompt and recent messages.
  const ledgerMessages: ModelMessage[] =
    entries.length > 0
      ? [{ role: 'user', content: formatLedgerForContext(entries, Math.floor((maxTokens * 4) / 3)) }]
      : [];

  const report = (
    trigger: CompactionReport['trigger'],
    head: ModelMessage[],
    tail: ModelMessage[],
    usage: ModelUsage,
  ): CompactionReport => {
    window.rebuild(head, tail);
    const after = window.render();
    return {
      trigger,
      tokensBefore,
      tokensAfter: estimateTokens(after) + overheadTokens,
      messagesBefore: before.messages,
      messagesAfter: after.length,
      ledgerEntriesUsed: entries.length,
      usage,
    };
  };

  const recent = pairSafeTail(runMessages, options.keepRecent);
  if (entries.length >= options.minLedgerEntries) {
    const head = [...taskMessages, ...ledgerMessages];
    const openBlock = window.openBlockMessages();
    const wide = openBlock.length > recent.length ? pairSafeTail(runMessages, openBlock.length) : recent;
    for (const tail of wide === recent ? [recent] : [wide, recent]) {
      if (measure(head, tail) <= maxTokens)
        return report('threshold', head, tail, { inputTokens: 0, outputTokens: 0 });
    }
  }

  // Layer 3: summarise everything that will not be kept verbatim (older history included).
  const tails = [recent];
  for (let count = Math.floor(options.keepRecent / 2); count >= 1; count = Math.floor(count / 2)) {
    const tail = pairSafeTail(runMessages, count);
    if (tail.length < tails[tails.length - 1]!.length) tails.push(tail);
  }
  const smallestTail = tails[tails.length - 1]!;
  const dropped = [
    // The previous ledger message is rebuilt fresh below; summarising it again would waste the budget.
    ...window.head().filter((message) => message !== task && !message.content.startsWith(ledgerHeader)),
    ...runMessages.slice(0, runMessages.length - smallestTail.length),
  ];
  const summaryCharBudget = Math.min(20_000, Math.floor(options.model.contextWindowTokens * 4 * 0.5));
  const response = await completeModel(
    options.model,
    {
      messages: [
        { role: 'system', content: summarizerPrompt },
        { role: 'user', content: renderForSummary(dropped, summaryCharBudget) },
      ],
      maxTokens: Math.max(256, Math.min(2000, Math.floor(maxTokens / 8))),
      metadata: { purpose: 'compaction' },
    },
    options.modelCallOptions,
  );
  let summary = response.text.trim();
  if (response.error || summary === '') {
    options.logger.warn(
      { error: response.error },
      'emergency summarisation failed; older messages are dropped without a summary',
    );
    summary =
      '(A summary of the earlier messages could not be produced; they were dropped. Use ledger_read for your records.)';
  }
  const head = [
    ...taskMessages,
    ...ledgerMessages,
    { role: 'user' as const, content: `[summary of earlier work]\n${summary}` },
  ];
  const tail = tails.find((candidate) => measure(head, candidate) <= maxTokens) ?? smallestTail;
  if (measure(head, tail) > maxTokens)
    options.logger.warn({ maxTokens }, 'context is still above the compaction threshold after summarisation');
  return report('emergency', head, tail, response.usage);
}
