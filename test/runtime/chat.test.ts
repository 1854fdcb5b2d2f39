import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { GatewayClient } from '../../src/cli/gateway-client.js';
import type { Runtime } from '../../src/runtime.js';
import { createStore } from '../../src/store/index.js';
import { createScriptedModel, type ScriptedModel } from '../../src/testing.js';
import { createManualClock } from '../../src/util/index.js';
import { captureLog, collectRun, startRuntime, tempHome } from './helpers.js';

/** OpenClaw history rows carry user text as a string and assistant text as content blocks. */
function textOf(content: string | Array<{ text: string }>): string {
  return typeof content === 'string' ? content : content.map((block) => block.text).join('');
}

/**
 * Sends one message to the main session, collecting the run's events from before the send so none is
 * missed; resolves with the ack and, still pending, the run's events.
 */
async function sendChat(client: GatewayClient, message: string, idempotencyKey: string) {
  const done = collectRun(client, idempotencyKey);
  const ack = await client.call<{ runId: string; status: string }>('chat.send', {
    sessionKey: 'agent:main:main',
    message,
    idempotencyKey,
  });
  return { ack, done };
}

describe('chat turns through the gateway (runtime wiring)', () => {
  let runtime: Runtime | undefined;
  let client: GatewayClient | undefined;
  let model: ScriptedModel | undefined;

  afterEach(async () => {
    await client?.close();
    await runtime?.close();
    model?.assertAllConsumed();
    client = undefined;
    runtime = undefined;
    model = undefined;
  });

  /** Starts a runtime the afterEach closes and connects a client to it. */
  async function startConnected(options: Parameters<typeof startRuntime>[0]) {
    const started = await startRuntime(options);
    runtime = started.runtime;
    client = await started.connect();
    return { started, runtime, client };
  }

  it('streams a reply, persists both sides with MemoryIDs and serves them from chat.history', async () => {
    model = createScriptedModel({
      steps: [{ text: ['Hel', 'lo ', 'Ada'], usage: { inputTokens: 12, outputTokens: 3 } }],
    });
    const { client } = await startConnected({ model });
    const { ack, done } = await sendChat(client, 'My name is Ada', 'idem-1');
    expect(ack).toEqual({ runId: 'idem-1', status: 'started' });
    const events = await done;
    const chat = events.filter((event) => event.event === 'chat');
    expect(chat.at(-1)!.payload.state).toBe('final');
    expect(chat.at(-1)!.payload.message.content[0].text).toBe('Hello Ada');
    const deltas = chat
      .filter((event) => event.payload.state === 'delta')
      .map((event) => event.payload.deltaText)
      .join('');
    expect(deltas).toBe('Hello Ada');

    // The model saw the identity system prompt and the user message.
    const request = model.requests[0]!;
    expect(request.messages[0]!.role).toBe('system');
    expect(request.messages.at(-1)).toEqual({ role: 'user', content: 'My name is Ada' });

    const history = await client.call<{
      messages: Array<{ role: string; content: string | Array<{ text: string }>; memoryId: string }>;
    }>('chat.history', {
      sessionKey: 'agent:main:main',
    });
    expect(history.messages.map((message) => [message.role, textOf(message.content)])).toEqual([
      ['user', 'My name is Ada'],
      ['assistant', 'Hello Ada'],
    ]);
    expect(history.messages.map((message) => message.memoryId)).toEqual([
      'agent:main:main#1',
      'agent:main:main#2',
    ]);

    // A duplicate send is not run twice.
    const duplicate = await client.call<{ status: string }>('chat.send', {
      sessionKey: 'agent:main:main',
      message: 'My name is Ada',
      idempotencyKey: 'idem-1',
    });
    expect(['in_flight', 'ok', 'started']).toContain(duplicate.status);
    expect(model.requests).toHaveLength(1);
  });

  it('keeps the user message and writes no assistant entry when the provider fails', async () => {
    model = createScriptedModel({
      steps: [
        {
          text: 'half a sen',
          error: { code: 'PROVIDER_UNAVAILABLE', message: 'upstream 503', retryable: false },
        },
      ],
    });
    const { client } = await startConnected({ model });
    const events = await (await sendChat(client, 'are you there?', 'idem-err')).done;
    const last = events.at(-1)!.payload;
    expect(last.state).toBe('error');
    expect(last.errorMessage).toContain('upstream 503');
    const history = await client.call<{
      messages: Array<{ role: string; content: string | Array<{ text: string }> }>;
    }>('chat.history', { sessionKey: 'agent:main:main' });
    expect(history.messages.map((message) => [message.role, textOf(message.content)])).toEqual([
      ['user', 'are you there?'],
    ]);
  });

  it('runs the tools of one turn, streams tool events and records the ledger', async () => {
    model = createScriptedModel({
      steps: [
        {
          toolCalls: [
            {
              name: 'ledger_append',
              arguments: { entry_type: 'finding', content: 'the workspace has identity files' },
            },
            { name: 'list_files', arguments: { path: '.' } },
          ],
        },
        { text: 'Done.' },
      ],
    });
    const { runtime, client } = await startConnected({ model });
    const events = await (await sendChat(client, 'look around', 'idem-tools')).done;
    const toolEvents = events.filter((event) => event.event === 'agent' && event.payload.stream === 'tool');
    expect(toolEvents.map((event) => event.payload.data?.name ?? event.payload.data?.toolName)).toEqual(
      expect.arrayContaining(['ledger_append', 'list_files']),
    );
    // The second model call got both tool results, matched by call id.
    const second = model.requests[1]!;
    const toolMessages = second.messages.filter((message) => message.role === 'tool');
    expect(toolMessages.map((message) => (message as { toolName: string }).toolName)).toEqual([
      'ledger_append',
      'list_files',
    ]);
    expect((toolMessages[1] as { content: string }).content).toContain('SOUL.md');
    const sessionId = (await runtime.store.sessions.getActive('agent:main:main'))!.id;
    const ledger = await runtime.ledger.read(`session:${sessionId}`, {});
    expect(ledger.map((entry) => [entry.entryType, entry.content])).toEqual([
      ['finding', 'the workspace has identity files'],
    ]);
  });

  it('aborts a running turn with chat.abort', async () => {
    let modelCalled!: () => void;
    const seenStart = new Promise<void>((resolve) => {
      modelCalled = resolve;
    });
    model = createScriptedModel({
      steps: [
        () => {
          modelCalled();
          return { hang: true };
        },
      ],
    });
    const { client } = await startConnected({ model });
    const { done } = await sendChat(client, 'think forever', 'idem-hang');
    await seenStart;
    const result = await client.call<{ aborted: boolean; runIds: string[] }>('chat.abort', {
      sessionKey: 'agent:main:main',
    });
    expect(result.aborted).toBe(true);
    expect(result.runIds).toEqual(['idem-hang']);
    const events = await done;
    expect(events.at(-1)!.payload.state).toBe('aborted');
  });

  it('gives a message sent again within memory.recall.promptReuseMs of agentd.yaml its first recall (0: every turn searches)', async () => {
    const searchesOfTwoSendings = async (yaml: string | undefined) => {
      const home = tempHome();
      if (yaml !== undefined) writeFileSync(join(home, 'agentd.yaml'), yaml);
      // A clock that stands still: the two sendings are within any reuse time, and searches take none of it.
      const started = await startRuntime({ home, clock: createManualClock(Date.now()) });
      try {
        const searches = vi.spyOn(started.runtime.memory, 'recallForPrompt');
        for (const idempotencyKey of ['lighthouse-1', 'lighthouse-2']) {
          const ack = await started.runtime.chat.send({
            sessionKey: 'agent:main:main',
            agentId: 'main',
            text: 'what about the lighthouse keeper?',
            idempotencyKey,
          });
          expect((await started.runtime.chat.wait(ack.runId)).status).toBe('completed');
        }
        return searches.mock.calls.length;
      } finally {
        await started.runtime.close();
      }
    };
    expect(await searchesOfTwoSendings(undefined)).toBe(1);
    expect(await searchesOfTwoSendings('memory:\n  recall:\n    promptReuseMs: 0\n')).toBe(2);
    await expect(searchesOfTwoSendings('memory:\n  recall:\n    promptReuseMs: -1\n')).rejects.toMatchObject({
      code: 'INVALID_CONFIG',
    });
  });

  it('gives the next turn an identity file edited a moment before, through its folder watcher', async () => {
    model = createScriptedModel({ steps: [{ text: ['one'] }, { text: ['two'] }] });
    // A clock that stands still: no recheck of the files falls due, and only the watcher can tell of the edit.
    const started = await startRuntime({ model, clock: createManualClock(Date.now()) });
    runtime = started.runtime;
    const say = async (text: string) => {
      const ack = await started.runtime.chat.send({
        sessionKey: 'agent:main:main',
        agentId: 'main',
        text,
        idempotencyKey: text,
      });
      expect((await started.runtime.chat.wait(ack.runId)).status).toBe('completed');
    };
    const systemOf = (call: number) =>
      model!.requests[call]!.messages.find((message) => message.role === 'system')?.content;
    await say('first');
    expect(systemOf(0)).not.toContain('Answer like a lighthouse keeper.');
    const changed = new Promise<string>((resolve) => started.runtime.identity.onChange(resolve));
    writeFileSync(
      join(started.runtime.state.workspaceDir, 'SOUL.md'),
      '# Soul\n\nAnswer like a lighthouse keeper.\n',
    );
    expect(await changed).toBe('main');
    await say('second');
    expect(systemOf(1)).toContain('Answer like a lighthouse keeper.');
  });

  it('answers a question sent right after a greeting from the memories it asks about', async () => {
    const started = await startRuntime({ clock: createManualClock(Date.now()) });
    runtime = started.runtime;
    const say = async (sessionKey: string, text: string) => {
      const ack = await started.runtime.chat.send({
        sessionKey,
        agentId: 'main',
        text,
        idempotencyKey: text,
      });
      const record = await started.runtime.chat.wait(ack.runId);
      expect(record.status).toBe('completed');
      return record.text ?? '';
    };
    await say('agent:main:pets', 'My cat is called Pixel.');
    // Another session, within the same instant: the question's recall is its own, not the greeting's.
    await say('agent:main:other', 'hello there');
    expect(await say('agent:main:other', 'What is my cat called?')).toContain('My cat is called Pixel.');
  });

  it('makes no AbortSignal for a turn that nothing aborts (the local model reads none)', async () => {
    const started = await startRuntime({});
    runtime = started.runtime;
    const turn = async (idempotencyKey: string) => {
      const ack = await started.runtime.chat.send({
        sessionKey: 'agent:main:main',
        agentId: 'main',
        text: `hello ${idempotencyKey}`,
        idempotencyKey,
      });
      return await started.runtime.chat.wait(ack.runId);
    };
    // The first turn loads the session and what a turn needs once.
    expect((await turn('first')).status).toBe('completed');
    const made = vi.spyOn(AbortController.prototype, 'signal', 'get');
    try {
      expect((await turn('second')).status).toBe('completed');
      expect(made).not.toHaveBeenCalled();
    } finally {
      made.mockRestore();
    }
  });

  it('sends a turn after another process archived its session to the new instance, checked by the commit', async () => {
    const home = tempHome();
    const started = await startRuntime({ home });
    runtime = started.runtime;
    const key = 'agent:main:main';
    const turn = async (idempotencyKey: string) => {
      const ack = await started.runtime.chat.send({
        sessionKey: key,
        agentId: 'main',
        text: `hello ${idempotencyKey}`,
        idempotencyKey,
      });
      return await started.runtime.chat.wait(ack.runId);
    };
    const sessionOf = async (text: string) =>
      (
        await started.runtime.store.db.get<{ session_id: string }>(
          'SELECT session_id FROM memory_entries WHERE content = ?',
          [text],
        )
      )?.session_id;
    expect((await turn('first')).status).toBe('completed');
    const first = (await started.runtime.store.sessions.getActive(key))!.id;
    // A turn on a kept id asks no PRAGMA data_version: its commit checks the instance.
    const versionReads = vi.spyOn(started.runtime.store.db, 'readVersion');
    try {
      expect((await turn('second')).status).toBe('completed');
      expect(versionReads).not.toHaveBeenCalled();
    } finally {
      versionReads.mockRestore();
    }
    expect(await sessionOf('hello second')).toBe(first);
    // While memory is degraded a message goes through the inbox and its commit may be queued in RAM, where
    // a refusal could not reach the turn: the turn asks the version again.
    started.runtime.memory.reportWriteFailure(new Error('disk I/O error'));
    const degradedReads = vi.spyOn(started.runtime.store.db, 'readVersion');
    try {
      expect((await turn('while degraded')).status).toBe('completed');
      expect(degradedReads).toHaveBeenCalled();
    } finally {
      degradedReads.mockRestore();
    }
    await vi.waitFor(() => expect(started.runtime.memory.status().degraded).toBe(false), { timeout: 5000 });
    // Another process on the same file (a command-line `/new`) ends the instance.
    const other = await createStore({ stateDir: home });
    try {
      await other.sessions.archive(key, 'reset');
    } finally {
      await other.close();
    }
    const before = (await started.runtime.store.sessions.getById(first))!;
    expect(before.status).toBe('archived');
    expect((await turn('third')).status).toBe('completed');
    const now = (await started.runtime.store.sessions.getActive(key))!;
    expect(now.id).not.toBe(first);
    expect(await sessionOf('hello third')).toBe(now.id);
    // The refused commit left the archived instance as it was, and memory is not degraded.
    const after = (await started.runtime.store.sessions.getById(first))!;
    expect(after.messageCount).toBe(before.messageCount);
    expect(after.lastActiveAt).toBe(before.lastActiveAt);
    expect(started.runtime.memory.status().degraded).toBe(false);
    expect((await turn('fourth')).status).toBe('completed');
    expect(await sessionOf('hello fourth')).toBe(now.id);
  });

  it('runs RAM-only with a loud warning when the database file is corrupt', async () => {
    const home = tempHome();
    writeFileSync(join(home, 'agentd.db'), 'this is not a sqlite database, just garbage bytes '.repeat(200));
    const log = captureLog();
    model = createScriptedModel({ steps: [{ text: 'still here' }] });
    const started = await startRuntime({ home, model, log });
    runtime = started.runtime;
    expect(runtime.store.mode).toBe('memory');
    const health = (await (
      await fetch(`${started.url.replace(/^ws/, 'http')}/health`, {
        headers: { authorization: `Bearer ${runtime.state.token}` },
      })
    ).json()) as Record<string, any>;
    expect(health.status).toBe('degraded');
    expect(health.store.mode).toBe('memory');
    expect(health.store.degradedReason).toBeTruthy();
    expect(log.text()).toContain('STORE DEGRADED');
    // Clients are told explicitly: OpenClaw in hello-ok's health snapshot, Spiderweb with an error frame.
    client = await started.connect();
    expect(client.hello.snapshot.health).toMatchObject({ status: 'degraded' });
    const { WebSocket } = await import('ws');
    const flat = new WebSocket(
      `${started.url}/v1/agents/main/stream?session=main&token=${runtime.state.token}`,
    );
    const frames: Array<{ type: string; code?: string }> = [];
    flat.on('message', (data) => frames.push(JSON.parse(String(data))));
    await expect.poll(() => frames.map((frame) => frame.type)).toEqual(['session.ack', 'error']);
    expect(frames[1]!.code).toBe('STORE_UNAVAILABLE');
    flat.close();
    const reply = await runtime.sendMessage({ text: 'hello' });
    expect(reply.text).toBe('still here');
    // The bad file is left for the operator to inspect.
    expect(readFileSync(join(home, 'agentd.db'), 'utf8')).toContain('garbage bytes');
  });

  it('never leaks a planted secret into logs, events, health or errors', async () => {
    const secret = 'sk-planted-0123456789abcdef';
    const home = tempHome();
    mkdirSync(home, { recursive: true });
    const log = captureLog();
    model = createScriptedModel({
      steps: [{ error: { code: 'PROVIDER_AUTH', message: `invalid key ${secret}` } }],
    });
    const connected = await startConnected({
      home,
      model,
      log,
      env: { OPENAI_API_KEY: secret, AGENTD_LOG_LEVEL: 'debug' },
    });
    const events = await (await sendChat(connected.client, `my key is ${secret}? no.`, 'idem-secret')).done;
    const health = await (
      await fetch(`${connected.started.url.replace(/^ws/, 'http')}/health`, {
        headers: { authorization: `Bearer ${connected.runtime.state.token}` },
      })
    ).text();
    const status = JSON.stringify(await connected.client.call('status'));
    await connected.client.close();
    client = undefined;
    const wireText = JSON.stringify(events.filter((event) => event.payload.state === 'error'));
    await connected.runtime.close();
    const stored = JSON.stringify(
      await (await import('../../src/store/index.js')).createStore({ stateDir: home }).then(async (store) => {
        const rows = await store.events.list({ limit: 1000 });
        await store.close();
        return rows.filter((row) => row.type !== 'run:started');
      }),
    );
    runtime = undefined;
    for (const text of [log.text(), health, status, wireText, stored]) expect(text).not.toContain(secret);
    // The failure was recorded, scrubbed, not dropped.
    expect(stored).toContain('[REDACTED]');
    expect(wireText).toContain('[REDACTED]');
  });
});

describe('acknowledged messages survive a crash before their turn starts', () => {
  it('resumes a message left in the inbox at the next start', async () => {
    const home = tempHome();
    const { createStore } = await import('../../src/store/index.js');
    const store = await createStore({ stateDir: home });
    await store.kv.set(
      'chat-inbox',
      'idem-orphan',
      JSON.stringify({
        runId: 'idem-orphan',
        sessionKey: 'agent:main:main',
        agentId: 'main',
        text: 'left behind',
        receivedAt: 1,
      }),
    );
    await store.close();

    const model = createScriptedModel({ steps: [{ text: 'picked up' }] });
    const finished = new Promise<string>((resolve) => {
      void startRuntime({ home, model }).then(async (started) => {
        const record = await started.runtime.chat.wait('idem-orphan');
        const history = await started.runtime.memory.history('agent:main:main');
        const left = await started.runtime.store.kv.list('chat-inbox');
        await started.runtime.close();
        resolve(
          JSON.stringify({
            status: record.status,
            history: history.map((entry) => entry.content),
            left: left.length,
          }),
        );
      });
    });
    expect(JSON.parse(await finished)).toEqual({
      status: 'completed',
      history: ['left behind', 'picked up'],
      left: 0,
    });
    model.assertAllConsumed();
  });
});

describe('hook scripts in a gateway chat turn', () => {
  it('blocks one tool call and patches another before they run', async () => {
    const home = tempHome();
    const hooksDir = join(home, 'hooks');
    mkdirSync(hooksDir, { recursive: true });
    // Blocks writes to .env files; rewrites list_files to look at the skills folder.
    writeFileSync(
      join(hooksDir, 'before_tool_call'),
      [
        '#!/bin/sh',
        'input=$(cat)',
        'case "$input" in',
        '  *\'"path":".env"\'*) echo \'{"action":"block","reason":"env files are protected"}\' ;;',
        '  *\'"toolName":"list_files"\'*) echo \'{"action":"modify","patch":{"arguments":{"path":"skills"}}}\' ;;',
        '  *) echo \'{"action":"allow"}\' ;;',
        'esac',
      ].join('\n'),
      { mode: 0o755 },
    );
    const model = createScriptedModel({
      steps: [
        {
          toolCalls: [
            { name: 'write_file', arguments: { path: '.env', content: 'SECRET=1' } },
            { name: 'list_files', arguments: { path: '.' } },
          ],
        },
        { text: 'ok' },
      ],
    });
    const started = await startRuntime({ home, model });
    const client = await started.connect();
    try {
      const { done } = await sendChat(client, 'write the env file', 'idem-hooks');
      expect((await done).at(-1)!.payload.state).toBe('final');
      const results = model.requests[1]!.messages.filter((message) => message.role === 'tool') as Array<{
        toolName: string;
        content: string;
        isError?: boolean;
      }>;
      expect(results[0]).toMatchObject({ toolName: 'write_file', isError: true });
      expect(results[0]!.content).toContain('env files are protected');
      expect(results[1]!.content).not.toContain('failed');
      expect(results[1]!.isError).toBeFalsy();
      expect(results[1]!.content).toContain('code-review');
      expect(existsSync(join(home, 'workspace', '.env'))).toBe(false);
    } finally {
      await client.close();
      await started.runtime.close();
    }
    model.assertAllConsumed();
  });
});
