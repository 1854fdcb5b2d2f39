import { estimateTokens, type ModelMessage } from '../model/index.js';

/** A ledger `step` entry that closed a block. */
export interface StepMarker {
  seq: number;
  content: string;
}

/** A `finding` or `decision` written during a block: what its summary keeps of it. */
export interface LearnedEntry {
  seq: number;
  entryType: 'finding' | 'decision';
  content: string;
}

/** How much of a block's findings and decisions its summary keeps. */
export const blockSummaryLimits = { maxEntries: 10, maxEntryChars: 300, maxChars: 2_000 } as const;

interface Block {
  /** The block's messages as rendered: the transcript's, with runtime notes among them. */
  items: ModelMessage[];
  /** Which of `items` are runtime notes (the nudge), not transcript; most blocks have none. */
  notes: Set<ModelMessage> | undefined;
  /** `estimateTokens` of the items, kept as they are added. */
  itemTokens: number;
  /** Findings and decisions written while the block was open. */
  learned: LearnedEntry[];
  /** Set once the block is closed and truncated: the one-line summaries that replace it. */
  summary?: string;
}

const maxStepSummaryChars = 300;

function oneLine(text: string, limit: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > limit ? `${flat.slice(0, limit)}…` : flat;
}

/** `[completed step N: …]`, on one line. */
export function formatStepSummary(step: StepMarker): string {
  return `[completed step ${step.seq}: ${oneLine(step.content, maxStepSummaryChars)}]`;
}

/**
 * The text a closed block is replaced by: its step lines, then the findings and decisions written in it
 * (newest kept when over the caps, in ledger order), so the model keeps what it learned without the
 * transcript. What the caps leave out is counted and stays readable with ledger_read.
 */
export function formatBlockSummary(
  steps: ReadonlyArray<StepMarker>,
  learned: ReadonlyArray<LearnedEntry>,
): string {
  const lines = steps.map(formatStepSummary);
  const kept: string[] = [];
  let used = 0;
  const newestFirst = [...learned].sort((left, right) => right.seq - left.seq);
  for (const entry of newestFirst) {
    if (kept.length >= blockSummaryLimits.maxEntries) break;
    const line = `  ${entry.entryType} #${entry.seq}: ${oneLine(entry.content, blockSummaryLimits.maxEntryChars)}`;
    if (used + line.length > blockSummaryLimits.maxChars) break;
    kept.push(line);
    used += line.length + 1;
  }
  if (kept.length > 0) lines.push('Learned in this step:', ...kept.reverse());
  const left = learned.length - kept.length;
  if (left > 0)
    lines.push(`  (${left} earlier finding(s)/decision(s) of this step are in the ledger: ledger_read)`);
  return lines.join('\n');
}

export interface ContextWindow {
  /** The system prompt with extras and active skills, as sent. */
  systemPrompt(): string;
  /** Adds or replaces an active skill; its body stays in the system prompt for the rest of the run. */
  setSkill(name: string, body: string): void;
  activeSkills(): string[];
  /**
   * Adds one turn (the assistant message and its tool results) to the open block. When the turn wrote
   * `step` entries the block closes after it — the pair is never split — and, with truncation on, is
   * replaced by its summary: the steps and the findings and decisions (`learned`) written in the block.
   * Returns whether a block closed.
   */
  appendTurn(messages: ModelMessage[], steps: StepMarker[], learned?: LearnedEntry[]): boolean;
  /** A runtime message (the ledger nudge) that is part of the context but not of the transcript. */
  appendNote(content: string): void;
  /** system + head + blocks (closed ones as their summaries). */
  render(): ModelMessage[];
  /**
   * What `render()` would return, measured without rendering: its `estimateTokens` and its length. Kept up
   * to date as messages are added, so checking the context against its budget every turn costs nothing.
   */
  measure(): { tokens: number; messages: number };
  /** The head messages (input history, or the rebuilt head after compaction). */
  head(): ModelMessage[];
  /** The latest user message of the run's input: the request every rebuilt context keeps. */
  taskMessage(): ModelMessage | undefined;
  /** Transcript messages still held in blocks (summaries and notes excluded), oldest first. */
  blockMessages(): ModelMessage[];
  /** Messages of the open block (notes excluded). */
  openBlockMessages(): ModelMessage[];
  /** Replaces everything after the system prompt: `head` then `tail` as a new open block. */
  rebuild(head: ModelMessage[], tail: ModelMessage[]): void;
}

export interface ContextWindowOptions {
  system: string;
  /** Appended to the system prompt in order (orient context, skill catalog, caller extras). */
  systemExtras: string[];
  /** The input messages after the system prompt: history and the new user message. */
  history: ModelMessage[];
  truncateClosedBlocks: boolean;
}

export function createContextWindow(options: ContextWindowOptions): ContextWindow {
  return new Window(options);
}

/**
 * A class rather than a literal of closures: every run makes a window, and its methods are then shared
 * instead of allocated (and, under tsx, named) per run.
 */
class Window implements ContextWindow {
  private headMessages: ModelMessage[];
  private blocks: Block[] = [openEmptyBlock()];
  private readonly skills = new Map<string, string>();
  private readonly task: ModelMessage | undefined;
  private cachedSystem: string | undefined;
  private systemTokens = 0;
  // Everything after the system prompt, as rendered: estimateTokens is a sum over messages, so it is kept
  // as a running total rather than recomputed over the whole conversation every turn.
  private bodyTokens: number;
  private bodyMessages: number;
  /** What `render()` returns (a copy of), while nothing has replaced or summarised what it holds. */
  private rendered: ModelMessage[] | undefined;

  constructor(private readonly options: ContextWindowOptions) {
    this.headMessages = [...options.history];
    this.task = options.history.findLast((message) => message.role === 'user');
    this.bodyTokens = estimateTokens(this.headMessages);
    this.bodyMessages = this.headMessages.length;
  }

  private openBlock(): Block {
    return this.blocks[this.blocks.length - 1]!;
  }

  /** Adds `messages` (whose estimate is `tokens`) to the open block. */
  private addToOpenBlock(messages: ModelMessage[], tokens: number): void {
    const block = this.openBlock();
    for (const message of messages) block.items.push(message);
    block.itemTokens += tokens;
    this.bodyTokens += tokens;
    this.bodyMessages += messages.length;
    if (this.rendered) for (const message of messages) this.rendered.push(message);
  }

  systemPrompt(): string {
    if (this.cachedSystem === undefined) {
      const parts = [this.options.system, ...this.options.systemExtras];
      for (const [name, body] of this.skills)
        parts.push(`<active_skill name="${name}">\n${body}\n</active_skill>`);
      this.cachedSystem = parts.filter((part) => part.trim() !== '').join('\n\n');
      this.systemTokens =
        this.cachedSystem === '' ? 0 : estimateTokens([{ role: 'system', content: this.cachedSystem }]);
    }
    return this.cachedSystem;
  }

  setSkill(name: string, body: string): void {
    this.skills.set(name, body);
    this.cachedSystem = undefined;
    this.rendered = undefined;
  }

  activeSkills(): string[] {
    return [...this.skills.keys()];
  }

  appendTurn(messages: ModelMessage[], steps: StepMarker[], learned: LearnedEntry[] = []): boolean {
    const block = this.openBlock();
    this.addToOpenBlock(messages, estimateTokens(messages));
    if (learned.length > 0) block.learned.push(...learned);
    if (steps.length === 0) return false;
    if (this.options.truncateClosedBlocks) {
      block.summary = formatBlockSummary(steps, block.learned);
      this.bodyTokens += estimateTokens([{ role: 'user', content: block.summary }]) - block.itemTokens;
      this.bodyMessages += 1 - block.items.length;
      this.rendered = undefined;
    }
    this.blocks.push(openEmptyBlock());
    return true;
  }

  appendNote(content: string): void {
    const message: ModelMessage = { role: 'user', content };
    const block = this.openBlock();
    block.notes ??= new Set();
    block.notes.add(message);
    this.addToOpenBlock([message], estimateTokens([message]));
  }

  render(): ModelMessage[] {
    // A copy of the rendering kept as messages are appended: every turn sends the whole context, and a
    // caller (a hook, a provider keeping the request) may hold on to what it got.
    if (!this.rendered) {
      const out: ModelMessage[] = [];
      const system = this.systemPrompt();
      if (system !== '') out.push({ role: 'system', content: system });
      for (const message of this.headMessages) out.push(message);
      for (const block of this.blocks) {
        if (block.summary !== undefined) out.push({ role: 'user', content: block.summary });
        else for (const message of block.items) out.push(message);
      }
      this.rendered = out;
    }
    return this.rendered.slice();
  }

  measure(): { tokens: number; messages: number } {
    const system = this.systemPrompt();
    return {
      tokens: this.systemTokens + this.bodyTokens,
      messages: (system === '' ? 0 : 1) + this.bodyMessages,
    };
  }

  head(): ModelMessage[] {
    return [...this.headMessages];
  }

  taskMessage(): ModelMessage | undefined {
    return this.task;
  }

  blockMessages(): ModelMessage[] {
    const out: ModelMessage[] = [];
    for (const block of this.blocks) {
      if (block.summary !== undefined) continue;
      for (const message of block.items) if (!block.notes?.has(message)) out.push(message);
    }
    return out;
  }

  openBlockMessages(): ModelMessage[] {
    const { items, notes } = this.openBlock();
    return notes ? items.filter((message) => !notes.has(message)) : [...items];
  }

  rebuild(newHead: ModelMessage[], tail: ModelMessage[]): void {
    this.headMessages = [...newHead];
    const tailTokens = estimateTokens(tail);
    this.blocks = [{ items: [...tail], notes: undefined, itemTokens: tailTokens, learned: [] }];
    this.bodyTokens = estimateTokens(this.headMessages) + tailTokens;
    this.bodyMessages = this.headMessages.length + tail.length;
    this.rendered = undefined;
  }
}

function openEmptyBlock(): Block {
  return { items: [], notes: undefined, itemTokens: 0, learned: [] };
}

/**
 * The last `count` messages, moved back so the slice never starts with a tool result whose call was cut off.
 */
export function pairSafeTail(messages: ReadonlyArray<ModelMessage>, count: number): ModelMessage[] {
  if (count >= messages.length) return [...messages];
  let start = Math.max(0, messages.length - Math.max(0, count));
  while (start > 0 && start < messages.length && messages[start]!.role === 'tool') start--;
  return messages.slice(start);
}
