import { completeModel, type LanguageModel } from '../model/index.js';
import { clipText, type Logger } from '../util/index.js';
import type { MemoryEntry } from './types.js';

export interface SummaryResult {
  text: string;
  method: 'model' | 'extractive';
  /** Why the model was not used (model failed, empty reply, no model configured). */
  fallbackReason?: string;
}

export interface Summarizer {
  summarize(entries: ReadonlyArray<MemoryEntry>, options?: { signal?: AbortSignal }): Promise<SummaryResult>;
}

const instructions =
  'You condense an earlier part of a conversation so an assistant can remember it. Write a short factual ' +
  'summary in plain sentences: who said or asked what, decisions, facts, names, dates, numbers, and open ' +
  'questions. No preamble, no commentary.';

function transcriptLine(entry: MemoryEntry): string {
  if (entry.kind === 'summary') return `(earlier summary) ${entry.content}`;
  if (entry.role === 'tool') return `tool ${entry.toolName ?? ''} result: ${entry.content}`;
  if (entry.role === 'assistant' && entry.toolCalls?.length) {
    const calls = entry.toolCalls.map((call) => `${call.name}(${JSON.stringify(call.arguments)})`).join(', ');
    return `assistant: ${entry.content}${entry.content ? ' ' : ''}[called ${calls}]`;
  }
  return `${entry.role}: ${entry.content}`;
}

/** First sentence (or the first `maxChars` characters) of a text, whitespace collapsed. */
function lead(text: string, maxChars: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  const sentence = /^(.+?[.!?])(\s|$)/.exec(flat)?.[1] ?? flat;
  return sentence.length <= maxChars ? sentence : `${sentence.slice(0, maxChars - 1).trimEnd()}…`;
}

/** Deterministic summary without a model: the lead sentence of each entry, within the budget. */
export function extractiveSummary(entries: ReadonlyArray<MemoryEntry>, maxChars: number): string {
  const perEntry = Math.max(40, Math.floor(maxChars / Math.max(1, entries.length)));
  const lines: string[] = [];
  let used = 0;
  for (const entry of entries) {
    const body =
      entry.kind === 'summary'
        ? entry.content
        : entry.role === 'tool'
          ? `${entry.toolName ?? 'tool'} → ${entry.content}`
          : entry.content;
    const line = `${entry.kind === 'summary' ? 'earlier' : entry.role}: ${lead(body, perEntry)}`;
    if (used + line.length > maxChars && lines.length > 0) break;
    lines.push(line);
    used += line.length + 1;
  }
  return lines.join('\n');
}

export interface SummarizerOptions {
  model?: LanguageModel;
  maxTokens: number;
  timeoutMs: number;
  logger: Logger;
}

/**
 * Summaries come from the model (`metadata.purpose: 'summarize'`, which the `local` model answers with its
 * own extractive summary) and fall back to `extractiveSummary` when there is no model, the call fails, or
 * it returns nothing: summarizing must never block memory maintenance.
 */
export function createSummarizer(options: SummarizerOptions): Summarizer {
  const maxChars = options.maxTokens * 4;
  return {
    async summarize(entries, callOptions = {}) {
      const fallback = (reason: string): SummaryResult => ({
        text: extractiveSummary(entries, maxChars),
        method: 'extractive',
        fallbackReason: reason,
      });
      if (!options.model) return fallback('no model configured');
      const response = await completeModel(
        options.model,
        {
          messages: [
            { role: 'system', content: instructions },
            { role: 'user', content: entries.map(transcriptLine).join('\n') },
          ],
          maxTokens: options.maxTokens,
          temperature: 0,
          toolChoice: 'none',
          metadata: { purpose: 'summarize' },
        },
        {
          timeoutMs: options.timeoutMs,
          retry: { maxAttempts: 2 },
          signal: callOptions.signal,
          logger: options.logger,
        },
      );
      if (response.error) {
        options.logger.warn(
          { code: response.error.code, error: response.error.message },
          'summary model failed; using extractive summary',
        );
        return fallback(`${response.error.code}: ${response.error.message}`);
      }
      const text = response.text.trim();
      if (!text) return fallback('model returned an empty summary');
      return { text: clipText(text, maxChars), method: 'model' };
    },
  };
}
