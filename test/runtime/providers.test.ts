import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { startFakeOpenAIServer } from '../helpers/fake-openai-server.js';
import { tempHome } from './helpers.js';

describe('agentd send against an OpenAI-compatible server', () => {
  it('uses OPENAI_BASE_URL without a key and streams the reply through the whole runtime', async () => {
    const server = await startFakeOpenAIServer();
    const saved = {
      base: process.env.OPENAI_BASE_URL,
      model: process.env.AGENTD_MODEL,
      key: process.env.OPENAI_API_KEY,
    };
    process.env.OPENAI_BASE_URL = server.baseURL;
    process.env.AGENTD_MODEL = 'openai/qwen2.5-7b-instruct';
    delete process.env.OPENAI_API_KEY;
    try {
      server.respond({
        type: 'stream',
        text: ['Served ', 'by the ', 'compatible server.'],
        usage: { promptTokens: 40, completionTokens: 6 },
      });
      let out = '';
      const code = await main(['node', 'agentd', '--home', tempHome(), 'send', 'hello there', '--json'], {
        stdout: (text) => {
          out += text;
        },
        stderr: () => {},
      });
      expect(code).toBe(0);
      expect(JSON.parse(out)).toMatchObject({
        status: 'completed',
        text: 'Served by the compatible server.',
      });
      expect(server.requests).toHaveLength(1);
      expect(server.requests[0]!.path).toBe('/v1/chat/completions');
      expect(server.requests[0]!.body.model).toBe('qwen2.5-7b-instruct');
      expect(server.requests[0]!.body.stream).toBe(true);
      const messages = server.requests[0]!.body.messages as Array<{ role: string; content: string }>;
      expect(messages[0]!.role).toBe('system');
      expect(messages.at(-1)).toEqual({ role: 'user', content: 'hello there' });
      // The built-in tools are offered to the model as JSON Schema function definitions.
      const toolNames = (server.requests[0]!.body.tools as Array<{ function: { name: string } }>).map(
        (tool) => tool.function.name,
      );
      expect(toolNames).toEqual(expect.arrayContaining(['read_file', 'ledger_append', 'memory_search']));
    } finally {
      for (const [name, value] of [
        ['OPENAI_BASE_URL', saved.base],
        ['AGENTD_MODEL', saved.model],
        ['OPENAI_API_KEY', saved.key],
      ] as const) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
      await server.close();
    }
  });
});
