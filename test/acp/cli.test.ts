import { spawn } from 'node:child_process';
import { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { client, ndJsonStream, type SessionUpdate } from '@agentclientprotocol/sdk';
import { describe, expect, it } from 'vitest';
import { startFakeOpenAIServer } from '../helpers/fake-openai-server.js';
import { tempHome } from '../runtime/helpers.js';

const bin = fileURLToPath(new URL('../../bin/agentd.js', import.meta.url));

describe('agentd acp (the built CLI as a child process)', () => {
  it('streams a prompt to end_turn and cancels the next one', async () => {
    const model = await startFakeOpenAIServer();
    model.respond({ type: 'stream', text: ['Hello ', 'from ', 'agentd.'] }, { type: 'hang' });
    const child = spawn(process.execPath, [bin, '--home', tempHome('agentd-acp-cli-'), 'acp'], {
      env: { ...process.env, OPENAI_BASE_URL: model.baseURL, AGENTD_MODEL: 'openai/gpt-test' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
    });
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      const stream = ndJsonStream(
        Writable.toWeb(child.stdin) as WritableStream<Uint8Array>,
        Readable.toWeb(child.stdout) as ReadableStream<Uint8Array>,
      );
      await client().connectWith(stream, async (ctx) => {
        const init = await ctx.request('initialize', { protocolVersion: 1, clientCapabilities: {} });
        expect(init.agentInfo).toMatchObject({ name: 'agentd' });
        const session = await ctx.buildSession(process.cwd()).start();
        expect(session.sessionId).toMatch(/^acp-/);

        void session.prompt('hi');
        const updates: SessionUpdate[] = [];
        let stop: string | undefined;
        while (stop === undefined) {
          const message = await session.nextUpdate();
          if (message.kind === 'stop') stop = message.stopReason;
          else updates.push(message.update);
        }
        expect(stop).toBe('end_turn');
        expect(updates.map((update) => update.sessionUpdate)).toEqual([
          'agent_message_chunk',
          'agent_message_chunk',
          'agent_message_chunk',
        ]);

        const hanging = session.prompt('this one hangs');
        await model.waitForRequests(2);
        await ctx.notify('session/cancel', { sessionId: session.sessionId });
        expect(await hanging).toEqual({ stopReason: 'cancelled' });
      });
      child.stdin.end();
      expect(await exited).toBe(0);
    } catch (error) {
      throw new Error(`${(error as Error).message}\nagentd stderr:\n${stderr}`);
    } finally {
      child.kill();
      await model.close();
    }
  });
});
