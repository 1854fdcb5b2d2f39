import type { ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { connectGateway } from '../../src/cli/gateway-client.js';
import { kill, serve } from '../helpers/serve-process.js';
import { collectRun, tempHome } from './helpers.js';

async function turn(url: string, token: string, text: string, runId: string) {
  const client = await connectGateway({ url, token });
  try {
    const done = collectRun(client, runId);
    await client.call('chat.send', { sessionKey: 'agent:main:main', message: text, idempotencyKey: runId });
    const events = await done;
    return events.at(-1)!.payload;
  } finally {
    await client.close();
  }
}

describe('crash safety of agentd serve', () => {
  const children: ChildProcess[] = [];
  afterEach(() => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  });

  it('keeps the conversation, evicted memory and recall across kill -9 and a restart', async () => {
    const home = tempHome('agentd-crash-');
    // A tiny RAM window so the conversation overflows into long-term memory before the crash.
    writeFileSync(join(home, 'agentd.yaml'), 'memory:\n  maxActiveEntries: 4\n');
    const first = await serve(home, undefined);
    children.push(first.child);
    const facts = [
      'The deploy is on Friday.',
      'The database is Postgres.',
      'My cat is called Pixel.',
      'The budget is 40 euros.',
    ];
    for (const [index, fact] of facts.entries()) {
      const final = await turn(first.url, first.token, fact, `fact-${index}`);
      expect(final.state).toBe('final');
    }
    await kill(first);

    const second = await serve(home, undefined);
    children.push(second.child);
    const client = await connectGateway({ url: second.url, token: second.token });
    try {
      const history = await client.call<{ messages: Array<{ role: string; content: unknown }> }>(
        'chat.history',
        { sessionKey: 'agent:main:main', limit: 100 },
      );
      const userTexts = history.messages
        .filter((message) => message.role === 'user')
        .map((message) => message.content);
      expect(userTexts).toEqual(facts);
      expect(history.messages.filter((message) => message.role === 'assistant')).toHaveLength(facts.length);
      const found = await client.call<{ items: Array<{ content?: string; text?: string }> }>('memory.query', {
        sessionKey: 'agent:main:main',
        topic: 'deploy',
        include_archived: true,
      });
      expect(JSON.stringify(found.items)).toContain('Friday');
    } finally {
      await client.close();
    }
    // The offline model answers from what survived the crash.
    const answer = await turn(second.url, second.token, 'When is the deploy?', 'question-1');
    expect(JSON.stringify(answer.message)).toContain('Friday');
    second.child.kill('SIGTERM');
    await new Promise((resolve) => second.child.once('exit', resolve));
    expect(second.child.exitCode).toBe(0);
  });
});
