import { execLiteral, literalPattern } from '../util/index.js';
import { estimateTokens } from './call.js';
import { contextWindowFor } from './context-windows.js';
import { instanceForSchema, normalizeKey } from './json-schema-instance.js';
import { chunkText, firstWords, keywords, splitSentences, stripBullet, words } from './local-text.js';
import { abortedError } from './provider-errors.js';
import {
  callAborted,
  type LanguageModel,
  type ModelCallOptions,
  type ModelMessage,
  type ModelRequest,
  type ModelStopReason,
  type ModelStreamEvent,
  type ModelToolCall,
  type ModelToolDefinition,
} from './spec.js';

/** Every reply of the local model carries this, so nobody mistakes it for a real LLM. */
export const localModelMarker = '[local model]';

/** The one-line how-to every offline notice ends with. */
export const realModelHowTo =
  'A real model is needed for this: set OPENAI_API_KEY or ANTHROPIC_API_KEY, or choose a model with AGENTD_MODEL (for example AGENTD_MODEL=openai/gpt-4o-mini), and run it again.';

/**
 * Said wherever the offline model's output could pass for real work (plans, task results, syntheses,
 * documents): what produced it, that nothing was really done, and how to get a real model.
 */
export const offlineWorkNotice = `This was produced by agentd's offline model, not a real language model: no real work was done. ${realModelHowTo}`;

/** True when the text came from the offline model (it carries the marker or the notice). */
export function isOfflineModelText(text: string): boolean {
  return text.includes(localModelMarker) || text.includes(offlineWorkNotice);
}

/** The line put at the top of a document the offline model returns, after its title if it has one. */
export const offlineDocumentNote = `> **Offline draft** ${localModelMarker}: ${offlineWorkNotice}`;

/** Options of `createLocalModel`, the offline model used when no real one is configured. */
export interface LocalModelOptions {
  /** Default `agentd-local`. */
  modelId?: string;
  /** Most tasks a plan gets, unless the request's `metadata.maxTasks` says otherwise. Default 5. */
  maxPlanTasks?: number;
}

export interface PlannedTask {
  title: string;
  description: string;
}

interface LocalReply {
  text: string;
  toolCalls: ModelToolCall[];
  stopReason: ModelStopReason;
}

/**
 * agentd's built-in offline model: deterministic (same request, same reply), honest (every reply
 * says `[local model]`), and useful enough to drive every feature with no key. The behaviours, in the
 * order they are tried, are documented in docs/models.md.
 */
export function createLocalModel(options: LocalModelOptions = {}): LanguageModel {
  const modelId = options.modelId ?? 'agentd-local';
  const reader = createSentenceReader();
  return {
    specificationVersion: 'v1',
    provider: 'local',
    modelId,
    contextWindowTokens: contextWindowFor('agentd-local'),
    doStream: (request, callOptions) => streamReply(request, callOptions, options.maxPlanTasks ?? 5, reader),
  };
}

async function* streamReply(
  request: ModelRequest,
  callOptions: ModelCallOptions,
  maxPlanTasks: number,
  reader: SentenceReader,
): AsyncGenerator<ModelStreamEvent, void, undefined> {
  const reply = localReply(request, maxPlanTasks, reader);
  for (const text of chunkText(reply.text)) {
    if (callAborted(callOptions)) {
      yield { type: 'error', error: abortedError() };
      return;
    }
    yield { type: 'text-delta', text };
  }
  for (const toolCall of reply.toolCalls) yield { type: 'tool-call', toolCall };
  yield {
    type: 'usage',
    usage: {
      inputTokens: estimateTokens(request.messages),
      outputTokens: estimateTokens(reply.text) + reply.toolCalls.length * 8,
    },
  };
  yield { type: 'finish', stopReason: reply.stopReason };
}

/**
 * The whole decision, synchronous and pure: `reader` only remembers what it read of earlier messages (the
 * answer is the same with a reader that has read nothing).
 */
function localReply(request: ModelRequest, maxPlanTasks: number, reader: SentenceReader): LocalReply {
  const metadata = request.metadata ?? {};
  const purpose = typeof metadata.purpose === 'string' ? metadata.purpose : undefined;
  const conversation = readConversation(request.messages);
  const labels = Array.isArray(metadata.labels)
    ? metadata.labels.filter((label): label is string => typeof label === 'string' && label.length > 0)
    : [];

  if (purpose === 'route' && labels.length > 0) {
    const input = typeof metadata.input === 'string' ? metadata.input : conversation.lastUser;
    return textReply(routeReply(request, pickLabel(input, labels)));
  }
  if (purpose === 'plan' || schemaAsksForTasks(request.responseFormat?.schema)) {
    const limit =
      typeof metadata.maxTasks === 'number' && metadata.maxTasks > 0
        ? Math.floor(metadata.maxTasks)
        : maxPlanTasks;
    const goal =
      typeof metadata.goal === 'string' ? metadata.goal : conversation.lastUser.replace(/^\s*\/goal\b/i, '');
    return textReply(planReply(request, goal.trim(), limit));
  }
  if (purpose === 'summarize') {
    const maxSentences = typeof metadata.maxSentences === 'number' ? Math.max(1, metadata.maxSentences) : 3;
    return textReply(
      formatReply(request, `${localModelMarker} Summary: ${summarize(request, maxSentences)}`),
    );
  }
  const tools = request.tools ?? [];
  if (tools.length > 0 && request.toolChoice !== 'none') {
    if (conversation.toolResults.length > 0) {
      return textReply(formatReply(request, describeToolResults(conversation.toolResults)));
    }
    const calls = chooseToolCalls(request, tools, conversation);
    if (calls.length > 0) {
      const names = calls.map((call) => call.name).join(', ');
      return { text: `${localModelMarker} Calling ${names}.`, toolCalls: calls, stopReason: 'tool_calls' };
    }
  }
  return textReply(formatReply(request, chat(conversation, reader)));
}

function textReply(text: string): LocalReply {
  return { text, toolCalls: [], stopReason: 'end_turn' };
}

// --- reading the conversation -------------------------------------------------------------------------

interface Conversation {
  messages: ReadonlyArray<ModelMessage>;
  lastUser: string;
  /** Messages before this index (before the last user message) are what the reply can draw on. */
  earlierEnd: number;
  /** Tool results that came back after the last user message. */
  toolResults: Array<Extract<ModelMessage, { role: 'tool' }>>;
  /** Assistant turns so far; makes tool call ids unique across a conversation. */
  assistantTurns: number;
}

/** One pass over the messages, copying none: a chat turn hands the model its whole context every time. */
function readConversation(messages: ModelMessage[]): Conversation {
  let lastUserIndex = -1;
  let assistantTurns = 0;
  for (let index = messages.length - 1; index >= 0; index--) {
    const { role } = messages[index]!;
    if (role === 'assistant') assistantTurns++;
    else if (role === 'user' && lastUserIndex < 0) lastUserIndex = index;
  }
  const toolResults: Conversation['toolResults'] = [];
  for (let index = lastUserIndex + 1; index < messages.length; index++) {
    const message = messages[index]!;
    if (message.role === 'tool') toolResults.push(message);
  }
  return {
    messages,
    lastUser: lastUserIndex >= 0 ? messages[lastUserIndex]!.content : '',
    earlierEnd: lastUserIndex >= 0 ? lastUserIndex : messages.length,
    toolResults,
    assistantTurns,
  };
}

// --- chat ---------------------------------------------------------------------------------------------

const questionStarters = new Set(
  'what who whom whose when where which why how is are was were do does did can could should would will have has tell remind recall'.split(
    ' ',
  ),
);
const greetings = new Set(['hello', 'hi', 'hey', 'greetings', 'hallo', 'howdy', 'yo']);

function chat(conversation: Conversation, reader: SentenceReader): string {
  const message = conversation.lastUser.trim();
  if (message === '') {
    return `${localModelMarker} I am agentd's offline model. Send a message and I will answer from this conversation and recalled memory.`;
  }
  const messageWords = words(message);
  if (messageWords.length <= 4 && greetings.has(messageWords[0] ?? '')) {
    return (
      `${localModelMarker} Hello! I am agentd's built-in offline model. I can recall what was said in this ` +
      'conversation, turn goals into plans and call tools you name. Configure a provider (OPENAI_API_KEY, ' +
      'ANTHROPIC_API_KEY, OPENAI_BASE_URL or AGENTD_MODEL) for real answers.'
    );
  }
  if (message.endsWith('?') || questionStarters.has(messageWords[0] ?? '')) {
    const evidence = findEvidence(message, conversation, reader);
    if (evidence.length === 0) {
      const topic = [...new Set(keywords(message))].slice(0, 6).join(', ');
      return `${localModelMarker} I don't know: nothing in this conversation or recalled memory mentions ${topic || 'that'}.`;
    }
    return `${localModelMarker} From this conversation and recalled memory: ${evidence.map((sentence) => `"${sentence}"`).join(' ')}`;
  }
  const task = /^Task:\s*(.+)/.exec(message);
  if (task) {
    // A work item's run: acknowledging it as "Noted" would read as if the task were done.
    return `${localModelMarker} Not done: the offline model cannot carry out "${firstWords(task[1]!, 160)}". ${offlineWorkNotice}`;
  }
  const first = splitSentences(message)[0] ?? message;
  return `${localModelMarker} Noted: "${firstWords(first, 200)}".`;
}

/** A sentence of a message as `findEvidence` weighs it. */
interface ReadSentence {
  text: string;
  lowerCased: string;
  /** Its distinct keywords. */
  keywords: ReadonlySet<string>;
  /** The offline model's own words, never quoted back as evidence. */
  ownReply: boolean;
}

/** A message text's sentences, read once and remembered (see `createSentenceReader`). */
export type SentenceReader = (text: string) => ReadonlyArray<ReadSentence>;

/**
 * Reads a message's sentences and remembers them by text, and for a text of several lines by line as well,
 * the oldest forgotten first once either memo holds more than `maxChars` characters. A chat turn hands the model its whole context each time, and
 * a question is weighed against every earlier user and system message: read afresh, the words of a full
 * context (an identity prompt, the recalled block, 64 turns) cost about 200 µs a question, almost all of it
 * spent again on the texts the last question read. The system message changes whenever automatic recall
 * finds other memories, and at a person's pace that is most turns; a sentence never spans a line break
 * (`splitSentences` splits at each), so a text's sentences are its lines' in order, and such a message reads
 * only its new lines, not the identity prompt and the memories recalled before.
 */
export function createSentenceReader(maxChars = 256 * 1024): SentenceReader {
  const sentencesOf = (text: string): ReadSentence[] =>
    splitSentences(text).map((sentence) => ({
      text: sentence,
      lowerCased: sentence.toLowerCase(),
      keywords: new Set(keywords(sentence)),
      ownReply: sentence.includes(localModelMarker),
    }));
  // A line `split` cut from a text is a slice that keeps the whole text alive: a remembered 20-character line
  // of a 100 KB message would hold the message long after the memo of texts let it go. It is kept as a copy.
  const readLine = boundedMemo(maxChars, sentencesOf, (line) => JSON.parse(JSON.stringify(line)) as string);
  return boundedMemo(maxChars, (text) =>
    text.includes('\n') ? text.split('\n').flatMap((line) => readLine(line)) : sentencesOf(text),
  );
}

/**
 * `compute` remembered for the texts given, at most `maxChars` characters of them, the oldest forgotten first;
 * a text is remembered (and computed) as `keep` gives it.
 */
function boundedMemo<Value>(
  maxChars: number,
  compute: (text: string) => Value,
  keep: (text: string) => string = (text) => text,
): (text: string) => Value {
  const held = new Map<string, Value>();
  let heldChars = 0;
  return (text) => {
    const known = held.get(text);
    if (known !== undefined) return known;
    if (text.length > maxChars) return compute(text);
    const kept = keep(text);
    const value = compute(kept);
    for (const oldest of held.keys()) {
      if (heldChars + kept.length <= maxChars) break;
      heldChars -= oldest.length;
      held.delete(oldest);
    }
    held.set(kept, value);
    heldChars += kept.length;
    return value;
  };
}

/** The earlier sentences (user turns and system messages, which carry recalled memory) that share the most keywords with the question. */
function findEvidence(question: string, conversation: Conversation, reader: SentenceReader): string[] {
  const wanted = new Set(keywords(question));
  if (wanted.size === 0) return [];
  const normalizedQuestion = question.trim().toLowerCase();
  // The sentences with the best overlap, oldest first: among equals the most recent wins, since later
  // statements supersede earlier ones.
  let best = 0;
  let bestSentences: string[] = [];
  for (let index = 0; index < conversation.earlierEnd; index++) {
    const message = conversation.messages[index]!;
    if (message.role !== 'user' && message.role !== 'system') continue;
    for (const sentence of reader(message.content)) {
      if (sentence.ownReply || sentence.lowerCased === normalizedQuestion) continue;
      let score = 0;
      for (const word of wanted) if (sentence.keywords.has(word)) score++;
      if (score === 0 || score < best) continue;
      if (score > best) {
        best = score;
        bestSentences = [];
      }
      bestSentences.push(sentence.text);
    }
  }
  const quoted = new Set<string>();
  for (let index = bestSentences.length - 1; index >= 0 && quoted.size < 2; index--)
    quoted.add(firstWords(bestSentences[index]!, 300));
  return [...quoted];
}

// --- tools --------------------------------------------------------------------------------------------

function chooseToolCalls(
  request: ModelRequest,
  tools: readonly ModelToolDefinition[],
  conversation: Conversation,
): ModelToolCall[] {
  const message = conversation.lastUser;
  const lowered = message.toLowerCase();
  const named = tools
    .map((tool) => ({ tool, position: findToolName(message, lowered, tool.name) }))
    .filter((entry) => entry.position >= 0)
    .sort((left, right) => left.position - right.position)
    .map((entry) => entry.tool);
  let chosen = named;
  const choice = request.toolChoice;
  if (typeof choice === 'object') {
    chosen = tools.filter((tool) => tool.name === choice.name);
  } else if (chosen.length === 0 && choice === 'required') {
    chosen = [bestMatchingTool(message, tools)];
  }
  // Most messages name no tool: nothing to read arguments for.
  if (chosen.length === 0) return [];
  const provided = extractArguments(message);
  const remainder = leftoverText(message, chosen);
  return chosen.map((tool, index) => ({
    id: `local_${conversation.assistantTurns + 1}_${index + 1}`,
    name: tool.name,
    arguments: toolArguments(tool, provided, remainder),
  }));
}

/** Index of the tool name as a whole word in the message (`lowered`: the message in lower case), or -1. */
function findToolName(message: string, lowered: string, name: string): number {
  const match = execLiteral(toolNameAround, name, message, 'i', lowered);
  return match ? match.index + match[1]!.length : -1;
}

/** A tool's name as a whole word; every model call that offers tools looks for each tool's name. */
function toolNamePattern(name: string, flags: 'i' | 'gi'): RegExp {
  return literalPattern(toolNameAround, name, flags);
}

const toolNameAround = (escaped: string) => `(^|[^\\w.-])${escaped}(?![\\w-])`;

function bestMatchingTool(message: string, tools: readonly ModelToolDefinition[]): ModelToolDefinition {
  const wanted = new Set(keywords(message));
  let best = tools[0]!;
  let bestScore = 0;
  for (const tool of tools) {
    const score = keywords(`${tool.name.replace(/[_-]/g, ' ')} ${tool.description}`).filter((word) =>
      wanted.has(word),
    ).length;
    if (score > bestScore) {
      best = tool;
      bestScore = score;
    }
  }
  return best;
}

const keyValuePattern = /([A-Za-z_][\w.-]*)=(?:"([^"]*)"|'([^']*)'|(\S+))/g;

/** A JSON object written in the message, merged with `key=value` pairs (quoted values may contain spaces). */
function extractArguments(message: string): Record<string, unknown> {
  const values: Record<string, unknown> = { ...findJsonObject(message) };
  for (const match of message.matchAll(keyValuePattern)) {
    values[match[1]!] = match[2] ?? match[3] ?? match[4] ?? '';
  }
  return values;
}

function findJsonObject(text: string): Record<string, unknown> | undefined {
  const start = text.indexOf('{');
  if (start < 0) return undefined;
  // Longest candidate first, so nested objects stay whole.
  for (let end = text.lastIndexOf('}'); end > start; end = text.lastIndexOf('}', end - 1)) {
    try {
      const value: unknown = JSON.parse(text.slice(start, end + 1));
      if (typeof value === 'object' && value !== null && !Array.isArray(value))
        return value as Record<string, unknown>;
    } catch {
      // Try a shorter candidate.
    }
  }
  return undefined;
}

/** The message without tool names, JSON, `key=value` pairs and request phrasing: the free text a tool may want. */
function leftoverText(message: string, tools: readonly ModelToolDefinition[]): string {
  let text = message;
  const json = findJsonObject(message);
  if (json) text = text.replace(/\{[\s\S]*\}/, ' ');
  text = text.replace(keyValuePattern, ' ');
  // A global pattern is safe to share here: replace() starts at 0 and leaves lastIndex at 0.
  for (const tool of tools) text = text.replace(toolNamePattern(tool.name, 'gi'), '$1 ');
  text = text
    .replace(/\b(?:please|use|call|run|invoke|the|tools?|with|to|and|for|on)\b/gi, ' ')
    .replace(/\s+/g, ' ')
    .trim()
    .replace(/^[,:;.\s]+|[,:;\s]+$/g, '');
  return text;
}

function toolArguments(
  tool: ModelToolDefinition,
  provided: Record<string, unknown>,
  remainder: string,
): Record<string, unknown> {
  const schema = tool.inputSchema;
  const properties = (schema.properties ?? {}) as Record<string, Record<string, unknown>>;
  const known = new Map(Object.keys(properties).map((key) => [normalizeKey(key), key]));
  const values: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(provided)) {
    const property = known.get(normalizeKey(key));
    if (property) values[property] = value;
    else if (schema.properties === undefined) values[key] = value;
  }
  // The first required text field nobody filled gets the rest of the message, e.g. a search query.
  const required = Array.isArray(schema.required) ? (schema.required as string[]) : [];
  const openText = required.find((key) => values[key] === undefined && properties[key]?.type === 'string');
  if (openText && remainder) values[openText] = remainder;
  const instance = instanceForSchema({ type: 'object', ...schema }, values, { fillOptional: false });
  return instance as Record<string, unknown>;
}

function describeToolResults(results: Array<Extract<ModelMessage, { role: 'tool' }>>): string {
  const lines = results.map(
    (result) =>
      `- ${result.toolName}${result.isError ? ' failed' : ''}: ${firstWords(result.content.replace(/\s+/g, ' '), 300) || '(empty)'}`,
  );
  return `${localModelMarker} Tool results:\n${lines.join('\n')}`;
}

// --- planning -----------------------------------------------------------------------------------------

function schemaAsksForTasks(schema: Record<string, unknown> | undefined): boolean {
  const properties = schema?.properties;
  return typeof properties === 'object' && properties !== null && 'tasks' in properties;
}

/**
 * Splits a goal into tasks: bullet or numbered lines, else `;`,
 * else sentences, each further split on "then" clauses, else on " and ". A goal that does not split gets
 * three generic steps. Duplicates are dropped and at most `limit` tasks are kept.
 */
export function planTasks(goal: string, limit: number): PlannedTask[] {
  const clean = goal.trim();
  if (clean === '') return [];
  const lines = clean.split(/\n+/).map(stripBullet).filter(Boolean);
  let pieces: string[];
  if (lines.length > 1) pieces = lines;
  else if (clean.includes(';')) pieces = clean.split(';');
  else {
    pieces = splitSentences(clean).flatMap((sentence) =>
      sentence.split(/,?\s+(?:and\s+)?then\s+|,\s*after that\s+|,\s*finally\s+/i),
    );
    if (pieces.length === 1) pieces = clean.split(/,?\s+and\s+/i);
  }
  const seen = new Set<string>();
  const clauses = pieces
    .map((piece) =>
      stripBullet(piece)
        .replace(/^(?:first|next|finally|also)[,:]?\s+/i, '')
        .replace(/[.!;,\s]+$/, ''),
    )
    .filter((piece) => piece.length > 0 && words(piece).length > 0)
    .filter((piece) => {
      const key = piece.toLowerCase();
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    });
  if (clauses.length < 2) {
    const subject = clauses[0] ?? clean;
    return [
      {
        title: 'Clarify what is needed',
        description: `Work out what "${firstWords(subject, 120)}" requires and what done looks like.`,
      },
      { title: 'Carry out the goal', description: subject },
      {
        title: 'Check and report the outcome',
        description: `Verify the result of "${firstWords(subject, 120)}" and report it.`,
      },
    ].slice(0, limit);
  }
  return clauses.slice(0, limit).map((clause) => ({ title: titleFor(clause), description: clause }));
}

function titleFor(clause: string): string {
  const title = firstWords(clause, 60);
  return title.charAt(0).toUpperCase() + title.slice(1);
}

function planReply(request: ModelRequest, goal: string, limit: number): string {
  const tasks = planTasks(goal, limit);
  const reply =
    tasks.length === 0
      ? `${localModelMarker} There is no goal to plan for.`
      : `${localModelMarker} I split the goal into ${tasks.length} task(s) by its sentences: ${firstWords(goal, 160)}. ` +
        `The offline model cannot carry them out; each will only be acknowledged. ${realModelHowTo}`;
  const plan = { reply, tasks };
  const schema = request.responseFormat?.schema;
  return JSON.stringify(
    schema ? instanceForSchema(schema, plan, { fillOptional: true, prose: reply }) : plan,
  );
}

// --- routing ------------------------------------------------------------------------------------------

/**
 * The label that best matches the text: a label written as a whole word or phrase (the earliest one in
 * the text wins), else the most shared keywords, else the first label.
 */
/** A label's words as a whole phrase, spaces matching any run of spaces, underscores or dashes. */
const labelAround = (escaped: string) =>
  `(?<![\\p{L}\\p{N}])${escaped.replace(/ /g, '[\\s_-]+')}(?![\\p{L}\\p{N}])`;

export function pickLabel(text: string, labels: string[]): { label: string; how: string } {
  const lower = text.toLowerCase();
  let earliest: { label: string; index: number } | undefined;
  for (const label of labels) {
    const phrase = label.toLowerCase().replace(/[_-]+/g, ' ').trim();
    const pattern = literalPattern(labelAround, phrase, 'u');
    const match = pattern.exec(lower);
    if (match && (earliest === undefined || match.index < earliest.index))
      earliest = { label, index: match.index };
  }
  if (earliest) return { label: earliest.label, how: 'it is named in the input' };
  const textWords = new Set(keywords(text));
  let best: { label: string; score: number } | undefined;
  for (const label of labels) {
    const labelWords = keywords(label.replace(/[_-]+/g, ' '));
    let score = 0;
    for (const word of labelWords) {
      if (textWords.has(word)) score += 1;
      else if (
        word.length >= 4 &&
        [...textWords].some(
          (other) => other.length >= 4 && (other.startsWith(word) || word.startsWith(other)),
        )
      )
        score += 0.5;
    }
    if (score > 0 && (best === undefined || score > best.score)) best = { label, score };
  }
  if (best) return { label: best.label, how: 'it shares the most words with the input' };
  return { label: labels[0]!, how: 'nothing matched, so the first label is the default' };
}

const edgeNames = new Set([
  'edge',
  'label',
  'route',
  'next',
  'selectededge',
  'selectededgelabel',
  'choice',
  'decision',
  'condition',
]);

function routeReply(request: ModelRequest, picked: { label: string; how: string }): string {
  const reason = `${localModelMarker} Picked "${picked.label}" because ${picked.how}.`;
  if (request.responseFormat?.type !== 'json') return `${picked.label}\n\n${reason}`;
  const schema = request.responseFormat.schema;
  if (!schema) return JSON.stringify({ edge: picked.label, reason });
  const properties = (schema.properties ?? {}) as Record<string, unknown>;
  const provided: Record<string, unknown> = {};
  for (const key of Object.keys(properties))
    if (edgeNames.has(normalizeKey(key))) provided[key] = picked.label;
  return JSON.stringify(instanceForSchema(schema, provided, { fillOptional: true, prose: reason }));
}

// --- summaries ----------------------------------------------------------------------------------------

/**
 * Extractive: scores each sentence of the non-system messages by how frequent its keywords are in the
 * whole text (normalised by length) and keeps the best `maxSentences`, in their original order.
 */
export function summarize(request: ModelRequest, maxSentences: number): string {
  const source =
    typeof request.metadata?.text === 'string'
      ? [request.metadata.text]
      : request.messages.filter((message) => message.role !== 'system').map((message) => message.content);
  const sentences = source
    .flatMap((text) => splitSentences(text))
    .filter((sentence) => !sentence.includes(localModelMarker) && !/^summari[sz]e\b/i.test(sentence));
  if (sentences.length === 0) return '(nothing to summarise)';
  const frequency = new Map<string, number>();
  for (const sentence of sentences)
    for (const word of keywords(sentence)) frequency.set(word, (frequency.get(word) ?? 0) + 1);
  const scored = sentences.map((sentence, index) => {
    const sentenceWords = keywords(sentence);
    const total = sentenceWords.reduce((sum, word) => sum + (frequency.get(word) ?? 0), 0);
    return { sentence, index, score: total / Math.sqrt(sentenceWords.length + 1) };
  });
  const chosen = [...scored]
    .sort((left, right) => right.score - left.score || left.index - right.index)
    .slice(0, maxSentences)
    .sort((left, right) => left.index - right.index)
    .map((entry) => entry.sentence);
  let summary = chosen.join(' ');
  if (request.maxTokens !== undefined) summary = firstWords(summary, Math.max(20, request.maxTokens * 4));
  return summary;
}

// --- JSON replies -------------------------------------------------------------------------------------

/** Text as it is, or as a JSON object when the request asks for one: prose fields get the text, others are filled from the input. */
function formatReply(request: ModelRequest, text: string): string {
  if (request.responseFormat?.type !== 'json') return text;
  const schema = request.responseFormat.schema;
  if (!schema) return JSON.stringify({ reply: text });
  const lastUser = readConversation(request.messages).lastUser;
  return JSON.stringify(
    markDocuments(instanceForSchema(schema, extractArguments(lastUser), { fillOptional: true, prose: text })),
  );
}

/** Keys of structured replies that hold a whole document, which may be saved to a file as it is. */
const documentKeys = new Set(['markdown', 'document', 'body', 'content', 'html', 'draft']);

/**
 * A document in a structured reply (a `markdown` field, or any multi-line text) may be written to a file
 * unchanged, so the note that the offline model produced it goes into the text itself, once.
 */
function markDocuments(value: unknown): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(value)) {
    const isDocument =
      typeof field === 'string' &&
      (documentKeys.has(normalizeKey(key)) || field.trim().includes('\n')) &&
      !field.includes(offlineDocumentNote);
    out[key] = isDocument ? withOfflineNote(field) : field;
  }
  return out;
}

function withOfflineNote(text: string): string {
  const heading = /^(#[^\n]*\n)\n?/.exec(text);
  if (heading) return `${heading[1]}\n${offlineDocumentNote}\n\n${text.slice(heading[0].length)}`;
  return `${offlineDocumentNote}\n\n${text}`;
}
