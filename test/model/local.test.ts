import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { completeModel, streamModel } from '../../src/model/call.js';
import {
  createLocalModel,
  createSentenceReader,
  localModelMarker,
  offlineDocumentNote,
  offlineWorkNotice,
  pickLabel,
  planTasks,
  realModelHowTo,
} from '../../src/model/local.js';
import { keywords, splitSentences } from '../../src/model/local-text.js';
import type { ModelRequest, ModelStreamEvent } from '../../src/model/spec.js';

const model = createLocalModel();
const ask = (request: ModelRequest) => completeModel(model, request);

describe('local model: chat', () => {
  it('answers a question by quoting the earlier sentence with the best keyword overlap, marked as offline', async () => {
    const response = await ask({
      messages: [
        { role: 'system', content: 'You are a helpful assistant.' },
        { role: 'system', content: 'Recalled memory: The deploy key lives in the vault under ops/deploy.' },
        { role: 'user', content: 'My favourite colour is teal. I live in Lisbon.' },
        { role: 'assistant', content: `${localModelMarker} Noted.` },
        { role: 'user', content: 'Where do I live?' },
      ],
    });
    expect(response.text.startsWith(localModelMarker)).toBe(true);
    expect(response.text).toContain('"I live in Lisbon."');
    expect(response.text).not.toContain('teal');
    expect(response.stopReason).toBe('end_turn');

    const recalled = await ask({
      messages: [
        { role: 'system', content: 'Recalled memory: The deploy key lives in the vault under ops/deploy.' },
        { role: 'user', content: 'where is the deploy key?' },
      ],
    });
    expect(recalled.text).toContain('The deploy key lives in the vault under ops/deploy.');
  });

  it('quotes the two newest sentences of the best overlap, each once, never its own replies nor the question again', async () => {
    const messages: ModelRequest['messages'] = [
      { role: 'system', content: 'The vault key is in ops. The vault key is in ops.' },
      { role: 'user', content: 'Where is the vault key?' },
      { role: 'assistant', content: 'The vault key is under the mat.' },
      { role: 'user', content: `${localModelMarker} The vault key is in the attic.` },
      { role: 'user', content: 'The vault key moved to the safe. The key is blue.' },
      { role: 'user', content: 'where is the vault key?' },
    ];
    const expected = `${localModelMarker} From this conversation and recalled memory: "The vault key moved to the safe." "The vault key is in ops."`;
    expect((await ask({ messages })).text).toBe(expected);
    // Asked again, with every earlier text already read, and by a model that has read nothing: the same.
    expect((await ask({ messages })).text).toBe(expected);
    expect((await completeModel(createLocalModel(), { messages })).text).toBe(expected);
  });

  it('remembers the sentences of the texts it read, up to its size, forgetting the oldest first', () => {
    const read = createSentenceReader(40);
    const first = 'Alpha one. Beta two.';
    const sentences = read(first);
    expect(sentences.map((sentence) => [sentence.text, [...sentence.keywords]])).toEqual([
      ['Alpha one.', ['alpha', 'one']],
      ['Beta two.', ['beta', 'two']],
    ]);
    expect(read(first)).toBe(sentences);
    read('Gamma three, delta four.');
    // 20 + 24 characters are more than 40: the oldest text went, and is read again.
    const again = read(first);
    expect(again).not.toBe(sentences);
    expect(again).toEqual(sentences);
    const long = 'x'.repeat(41);
    expect(read(long)).not.toBe(read(long));
  });

  it('reads a text as its lines: the same sentences as the whole text read at once, for any text', () => {
    // Pieces that meet the sentence splitter's edges: end marks, runs of spaces of several kinds, CR, LF.
    const pieces = [
      'Alpha',
      'beta',
      'é',
      '42',
      ' ',
      '  ',
      '.',
      '!',
      '?',
      '\n',
      '\n\n',
      '\r',
      '\t',
      '\u00a0',
      '\u2028',
      localModelMarker,
    ];
    let seed = 7;
    const next = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const read = createSentenceReader(4_096);
    const direct = (text: string) =>
      splitSentences(text).map((sentence) => [
        sentence,
        [...new Set(keywords(sentence))],
        sentence.includes(localModelMarker),
      ]);
    for (let index = 0; index < 3_000; index++) {
      const text = Array.from(
        { length: 1 + Math.floor(next() * 24) },
        () => pieces[Math.floor(next() * pieces.length)],
      ).join('');
      const sentences = read(text).map((sentence) => [
        sentence.text,
        [...sentence.keywords],
        sentence.ownReply,
      ]);
      expect(sentences, JSON.stringify(text)).toEqual(direct(text));
    }
  });

  it('reads a system prompt whose recalled block changed only for its new lines', () => {
    const read = createSentenceReader();
    const identity = 'You are Ada. You keep notes.\nBe brief.';
    const before = read(`${identity}\n\nRelevant memories:\n- The vault key is blue.`);
    const after = read(`${identity}\n\nRelevant memories:\n- The boat is red.`);
    expect(after.map((sentence) => sentence.text)).toEqual([
      'You are Ada.',
      'You keep notes.',
      'Be brief.',
      'Relevant memories:',
      '- The boat is red.',
    ]);
    // The lines both prompts share were read once: the same sentences, not equal copies.
    for (let index = 0; index < 4; index++) expect(after[index]).toBe(before[index]);
    expect(after[4]).not.toBe(before[4]);
  });

  it('keeps no long message alive through a line it remembers', () => {
    setFlagsFromString('--expose-gc');
    const collect = runInNewContext('gc') as () => void;
    const read = createSentenceReader();
    const common = 'A line every message shares.\n'.repeat(3_500);
    collect();
    const before = process.memoryUsage().heapUsed;
    // 300 messages of 100 KB, each with one line of its own: only that line is new to the reader.
    for (let index = 0; index < 300; index++) read(`${common}Line number ${index} of its own.`);
    collect();
    const grownBytes = process.memoryUsage().heapUsed - before;
    // The lines and the newest texts within the reader's 2 x 256 K characters; the 30 MB of messages gone.
    expect(grownBytes).toBeLessThan(8 * 1024 * 1024);
  });

  it('says it does not know when nothing matches, and acknowledges statements', async () => {
    const unknown = await ask({ messages: [{ role: 'user', content: 'What is the capital of Peru?' }] });
    expect(unknown.text).toMatch(/^\[local model\] I don't know/);
    expect(unknown.text).toContain('peru');
    const noted = await ask({
      messages: [{ role: 'user', content: 'Remember that the meeting moved to Friday. Thanks.' }],
    });
    expect(noted.text).toBe(`${localModelMarker} Noted: "Remember that the meeting moved to Friday.".`);
    const hello = await ask({ messages: [{ role: 'user', content: 'hello' }] });
    expect(hello.text).toContain('offline model');
  });

  it('is deterministic, streams several chunks and reports estimated usage', async () => {
    const request: ModelRequest = {
      messages: [{ role: 'user', content: 'Remember that the build uses node twenty.' }],
    };
    const events: ModelStreamEvent[] = [];
    for await (const event of streamModel(model, request)) events.push(event);
    const deltas = events.filter((event) => event.type === 'text-delta');
    expect(deltas.length).toBeGreaterThan(1);
    const text = deltas.map((event) => (event as { text: string }).text).join('');
    expect(text).toBe((await ask(request)).text);
    const usage = events.find((event) => event.type === 'usage');
    expect(usage).toEqual({
      type: 'usage',
      usage: { inputTokens: 15, outputTokens: Math.ceil(text.length / 4) },
    });
  });

  it('called directly, stops between chunks once its signal (or `aborted`) says the call was aborted', async () => {
    const request: ModelRequest = {
      messages: [
        { role: 'user', content: 'Remember that the build uses node twenty and the deploy runs at noon.' },
      ],
    };
    const firstEvents = async (options: Parameters<typeof model.doStream>[1], stopAfter = 1) => {
      const events: ModelStreamEvent[] = [];
      for await (const event of model.doStream(request, options)) {
        events.push(event);
        if (events.length === stopAfter) break;
      }
      return events;
    };
    const aborted = { type: 'error', error: { code: 'ABORTED' } };
    expect(await firstEvents({ signal: AbortSignal.abort() })).toMatchObject([aborted]);
    expect(await firstEvents({ aborted: true })).toMatchObject([aborted]);
    // `aborted` says it when present, as the wrapper's options do; the signal is then not read.
    expect(await firstEvents({ aborted: false, signal: AbortSignal.abort() })).toMatchObject([
      { type: 'text-delta' },
    ]);

    // Aborted after the first chunk: the next event is the error, and the stream ends there.
    const controller = new AbortController();
    const events: ModelStreamEvent[] = [];
    for await (const event of model.doStream(request, { signal: controller.signal })) {
      events.push(event);
      controller.abort();
    }
    expect(events).toMatchObject([{ type: 'text-delta' }, aborted]);
  });
});

describe('local model: tools', () => {
  const tools = [
    {
      name: 'get_weather',
      description: 'Weather for a city',
      inputSchema: {
        type: 'object',
        properties: { city: { type: 'string' }, days: { type: 'integer', minimum: 1 } },
        required: ['city', 'days'],
      },
    },
    {
      name: 'search',
      description: 'Search the web',
      inputSchema: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] },
    },
    { name: 'clock', description: 'Current time', inputSchema: { type: 'object', properties: {} } },
  ];

  it('calls a tool named in the last user message with key=value arguments coerced to the schema', async () => {
    const response = await ask({
      messages: [{ role: 'user', content: 'use get_weather city="New York" days=3' }],
      tools,
    });
    expect(response.stopReason).toBe('tool_calls');
    expect(response.toolCalls).toEqual([
      { id: 'local_1_1', name: 'get_weather', arguments: { city: 'New York', days: 3 } },
    ]);
    expect(response.text).toContain(localModelMarker);
  });

  it('takes arguments from a JSON object, fills missing required fields minimally, and calls several tools in parallel', async () => {
    const response = await ask({
      messages: [{ role: 'user', content: 'Run clock and then get_weather with {"city": "Oslo"}' }],
      tools,
    });
    expect(response.toolCalls).toEqual([
      { id: 'local_1_1', name: 'clock', arguments: {} },
      { id: 'local_1_2', name: 'get_weather', arguments: { city: 'Oslo', days: 1 } },
    ]);
  });

  it('gives the rest of the message to the first required text field', async () => {
    const response = await ask({
      messages: [{ role: 'user', content: 'search for typescript agent runtimes' }],
      tools,
    });
    expect(response.toolCalls).toEqual([
      { id: 'local_1_1', name: 'search', arguments: { query: 'typescript agent runtimes' } },
    ]);
  });

  it('summarises tool results once they came back instead of calling again', async () => {
    const response = await ask({
      tools,
      messages: [
        { role: 'user', content: 'use clock' },
        { role: 'assistant', content: '', toolCalls: [{ id: 'local_1_1', name: 'clock', arguments: {} }] },
        { role: 'tool', toolCallId: 'local_1_1', toolName: 'clock', content: '12:00' },
      ],
    });
    expect(response.toolCalls).toEqual([]);
    expect(response.text).toBe(`${localModelMarker} Tool results:\n- clock: 12:00`);
  });

  it('finds a tool named in any letter case, as a whole word only, whatever its name is written in', async () => {
    const shouted = await ask({ messages: [{ role: 'user', content: 'please run GET_WEATHER now' }], tools });
    expect(shouted.toolCalls.map((call) => call.name)).toEqual(['get_weather']);
    const embedded = await ask({ messages: [{ role: 'user', content: 'use my_get_weather_x' }], tools });
    expect(embedded.toolCalls).toEqual([]);
    // A name outside ASCII (a caller's own tool list may hold one) matches as the pattern's case folding says.
    const greek = [{ name: 'ΣΟΦΙΑ', description: 'greek', inputSchema: { type: 'object', properties: {} } }];
    const lowerCase = await ask({ messages: [{ role: 'user', content: 'call σοφια now' }], tools: greek });
    expect(lowerCase.toolCalls.map((call) => call.name)).toEqual(['ΣΟΦΙΑ']);
  });

  it('does not call tools that are not named, or when toolChoice is none; honours a forced tool', async () => {
    const chatty = await ask({ messages: [{ role: 'user', content: 'what is the weather like' }], tools });
    expect(chatty.toolCalls).toEqual([]);
    const none = await ask({ messages: [{ role: 'user', content: 'use clock' }], tools, toolChoice: 'none' });
    expect(none.toolCalls).toEqual([]);
    const forced = await ask({
      messages: [{ role: 'user', content: 'anything' }],
      tools,
      toolChoice: { name: 'clock' },
    });
    expect(forced.toolCalls.map((call) => call.name)).toEqual(['clock']);
    const required = await ask({
      messages: [{ role: 'user', content: 'find pages on the web' }],
      tools,
      toolChoice: 'required',
    });
    expect(required.toolCalls.map((call) => call.name)).toEqual(['search']);
  });
});

describe('local model: planning', () => {
  const planSchema = z.object({
    reply: z.string(),
    tasks: z.array(z.object({ title: z.string(), description: z.string() })),
  });

  it('splits a goal into tasks by "then" clauses and returns JSON { reply, tasks }', async () => {
    const response = await ask({
      messages: [
        {
          role: 'user',
          content: '/goal Research vector databases, then compare their costs and then write a summary.',
        },
      ],
      metadata: { purpose: 'plan' },
    });
    const plan = planSchema.parse(JSON.parse(response.text));
    expect(plan.reply).toMatch(/^\[local model\] I split the goal into 3 task\(s\) by its sentences/);
    expect(plan.reply).toContain('cannot carry them out');
    expect(plan.reply).toContain(realModelHowTo);
    expect(plan.tasks.map((task) => task.description)).toEqual([
      'Research vector databases',
      'compare their costs',
      'write a summary',
    ]);
    expect(plan.tasks[1]!.title).toBe('Compare their costs');
  });

  it('splits bullets, semicolons, sentences and "and"; falls back to three generic steps; caps the count', () => {
    expect(planTasks('- buy milk\n- 2) call mum\n* fix bike', 5).map((task) => task.description)).toEqual([
      'buy milk',
      'call mum',
      'fix bike',
    ]);
    expect(planTasks('a thing; another thing', 5)).toHaveLength(2);
    expect(planTasks('Write the intro. Write the body.', 5).map((task) => task.description)).toEqual([
      'Write the intro',
      'Write the body',
    ]);
    expect(planTasks('wash the car and walk the dog', 5).map((task) => task.description)).toEqual([
      'wash the car',
      'walk the dog',
    ]);
    expect(planTasks('write a poem', 5).map((task) => task.title)).toEqual([
      'Clarify what is needed',
      'Carry out the goal',
      'Check and report the outcome',
    ]);
    expect(planTasks('1. a\n2. b\n3. c\n4. d\n5. e\n6. f', 5)).toHaveLength(5);
  });

  it('plans when the response schema asks for tasks, filling extra required fields', async () => {
    const schema = z.object({
      reply: z.string(),
      tasks: z
        .array(z.object({ title: z.string(), description: z.string(), priority: z.enum(['low', 'high']) }))
        .min(1),
      confidence: z.number().min(0).max(1),
    });
    const response = await ask({
      messages: [{ role: 'user', content: 'Draft the spec; review it' }],
      responseFormat: { type: 'json', schema: z.toJSONSchema(schema) as Record<string, unknown> },
    });
    const plan = schema.parse(JSON.parse(response.text));
    expect(plan.tasks).toEqual([
      { title: 'Draft the spec', description: 'Draft the spec', priority: 'low' },
      { title: 'Review it', description: 'review it', priority: 'low' },
    ]);
  });
});

describe('local model: routing, summaries and JSON', () => {
  it('picks labels: exact word first, then overlap, then the first label', () => {
    expect(pickLabel('Please edit the existing document', ['create', 'edit']).label).toBe('edit');
    expect(pickLabel('I want to create or edit', ['edit', 'create']).label).toBe('create');
    expect(pickLabel('we need a needs_review pass', ['approve', 'needs_review']).label).toBe('needs_review');
    expect(pickLabel('editing the draft please', ['create', 'edit']).label).toBe('edit');
    expect(pickLabel('nothing relevant', ['alpha', 'beta']).label).toBe('alpha');
  });

  it('replies with the label on the first line, or as JSON { edge } when asked', async () => {
    const request: ModelRequest = {
      messages: [{ role: 'user', content: 'Fix the typo in chapter two' }],
      metadata: { purpose: 'route', labels: ['create', 'edit'], input: 'edit chapter two' },
    };
    const text = await ask(request);
    expect(text.text.split('\n')[0]).toBe('edit');
    expect(text.text).toContain(localModelMarker);
    const json = await ask({ ...request, responseFormat: { type: 'json' } });
    expect(JSON.parse(json.text)).toMatchObject({ edge: 'edit' });
    const shaped = await ask({
      ...request,
      responseFormat: {
        type: 'json',
        schema: {
          type: 'object',
          properties: { selected_edge: { type: 'string' } },
          required: ['selected_edge'],
        },
      },
    });
    expect(JSON.parse(shaped.text)).toEqual({ selected_edge: 'edit' });
  });

  it('summarises extractively, keeping the sentences with the most frequent keywords in order', async () => {
    const response = await ask({
      metadata: { purpose: 'summarize', maxSentences: 2 },
      messages: [
        { role: 'system', content: 'Summarize the conversation.' },
        {
          role: 'user',
          content:
            'The database migration failed on Tuesday. Lunch was pizza. The migration failed because the database disk was full. We grew the database disk and the migration passed.',
        },
      ],
    });
    expect(response.text).toBe(
      `${localModelMarker} Summary: The migration failed because the database disk was full. We grew the database disk and the migration passed.`,
    );
  });

  it('produces JSON that validates against the requested schema, filling fields from the input', async () => {
    const schema = z.object({
      name: z.string(),
      age: z.number().int().min(0),
      email: z.email(),
      tags: z.array(z.string()).min(1),
      status: z.enum(['active', 'inactive']),
      answer: z.string(),
      nested: z.object({ ok: z.boolean() }),
    });
    const response = await ask({
      messages: [{ role: 'user', content: 'Record name="Ada Lovelace" age=36 status=inactive' }],
      responseFormat: { type: 'json', schema: z.toJSONSchema(schema) as Record<string, unknown> },
    });
    const value = schema.parse(JSON.parse(response.text));
    expect(value).toMatchObject({ name: 'Ada Lovelace', age: 36, status: 'inactive', nested: { ok: false } });
    expect(value.answer).toContain(localModelMarker);
    const plain = await ask({
      messages: [{ role: 'user', content: 'hi' }],
      responseFormat: { type: 'json' },
    });
    expect(JSON.parse(plain.text).reply).toContain(localModelMarker);
  });
});

describe('local model: the planner and workflow request shapes', () => {
  it('leaves optional task fields out and routes a selected_edge enum schema', async () => {
    const plan = await ask({
      messages: [{ role: 'user', content: 'Collect the logs, then find the error' }],
      responseFormat: {
        type: 'json',
        schema: {
          type: 'object',
          properties: {
            reply: { type: 'string' },
            tasks: {
              type: 'array',
              items: {
                type: 'object',
                properties: {
                  title: { type: 'string' },
                  description: { type: 'string' },
                  agent: { type: 'string' },
                },
                required: ['title'],
              },
            },
          },
          required: ['reply', 'tasks'],
        },
      },
      metadata: { purpose: 'plan', maxTasks: 5 },
    });
    expect(JSON.parse(plan.text).tasks).toEqual([
      { title: 'Collect the logs', description: 'Collect the logs' },
      { title: 'Find the error', description: 'find the error' },
    ]);
    const route = await ask({
      messages: [{ role: 'user', content: 'Choose a route' }],
      responseFormat: {
        type: 'json',
        schema: {
          type: 'object',
          properties: { selected_edge: { type: 'string', enum: ['create', 'edit'] } },
          required: ['selected_edge'],
        },
      },
      metadata: { purpose: 'route', labels: ['create', 'edit'], input: 'please edit my essay' },
    });
    expect(JSON.parse(route.text)).toEqual({ selected_edge: 'edit' });
  });
});

describe('local model: never passes for real work', () => {
  it('answers a work item run by saying it was not done, with the how-to', async () => {
    const response = await ask({
      messages: [
        { role: 'system', content: 'You are a worker.' },
        { role: 'user', content: 'Task: Compare the vendors\n\nCompare the three vendors on price.' },
      ],
    });
    expect(response.text).toBe(
      `${localModelMarker} Not done: the offline model cannot carry out "Compare the vendors". ${offlineWorkNotice}`,
    );
    for (const variable of ['OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'AGENTD_MODEL'])
      expect(response.text).toContain(variable);
  });

  it('puts a note into a document it returns, after the title, once', async () => {
    const schema = {
      type: 'object',
      properties: { title: { type: 'string' }, markdown: { type: 'string' } },
      required: ['title', 'markdown'],
    };
    const draft = '# Tide Pools\n\n## What Lives There\n\nNotes.\n';
    const first = await ask({
      messages: [{ role: 'user', content: JSON.stringify({ title: 'Tide Pools', markdown: draft }) }],
      responseFormat: { type: 'json', schema },
    });
    const document = JSON.parse(first.text) as { title: string; markdown: string };
    expect(document.title).toBe('Tide Pools');
    expect(document.markdown).toBe(
      `# Tide Pools\n\n${offlineDocumentNote}\n\n## What Lives There\n\nNotes.\n`,
    );
    const again = await ask({
      messages: [{ role: 'user', content: JSON.stringify(document) }],
      responseFormat: { type: 'json', schema },
    });
    expect(JSON.parse(again.text).markdown).toBe(document.markdown);
  });

  it('leaves short structured values alone', async () => {
    const response = await ask({
      messages: [{ role: 'user', content: JSON.stringify({ title: 'Tide Pools', tone: 'neutral' }) }],
      responseFormat: {
        type: 'json',
        schema: { type: 'object', properties: { title: { type: 'string' }, tone: { type: 'string' } } },
      },
    });
    expect(JSON.parse(response.text)).toEqual({ title: 'Tide Pools', tone: 'neutral' });
    expect(realModelHowTo).toContain('AGENTD_MODEL=');
  });
});
