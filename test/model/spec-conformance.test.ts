import { fileURLToPath } from 'node:url';
import {
  createAcpModel,
  createAnthropicModel,
  createCommandModel,
  createLocalModel,
  createOpenAIModel,
  createScriptedModel,
} from '../../src/model/index.js';
import { type FakeAnthropicServer, startFakeAnthropicServer } from '../helpers/fake-anthropic-server.js';
import { type FakeOpenAIServer, startFakeOpenAIServer } from '../helpers/fake-openai-server.js';
import { describeModelSpec } from '../helpers/model-spec.js';

/**
 * One fake server per test, closed afterwards. Unused responses are fine here: a call aborted before it
 * starts never reaches the server (the provider tests check the request/response pairing).
 */
function serverPerTest<S extends { pendingResponses(): number; close(): Promise<void> }>(
  start: () => Promise<S>,
) {
  let current: S | undefined;
  return {
    async next(): Promise<S> {
      current = await start();
      return current;
    },
    async done() {
      if (!current) return;
      const server = current;
      current = undefined;
      await server.close();
    },
  };
}

const openai = serverPerTest<FakeOpenAIServer>(startFakeOpenAIServer);
const openaiModel = (server: FakeOpenAIServer) =>
  createOpenAIModel({ model: 'gpt-4o-mini', apiKey: 'sk-test', baseURL: server.baseURL });
describeModelSpec('openai', {
  async succeeding() {
    const server = await openai.next();
    server.respond({ type: 'stream', text: ['Hel', 'lo.'], usage: { promptTokens: 9, completionTokens: 2 } });
    return openaiModel(server);
  },
  async failing() {
    const server = await openai.next();
    server.respond({ type: 'http-error', status: 400, body: { error: { message: 'bad request' } } });
    return openaiModel(server);
  },
  async hanging() {
    const server = await openai.next();
    server.respond({ type: 'hang' });
    return openaiModel(server);
  },
  reportsUsage: true,
  prepares: true,
  afterEach: () => openai.done(),
});

const anthropic = serverPerTest<FakeAnthropicServer>(startFakeAnthropicServer);
const anthropicModel = (server: FakeAnthropicServer) =>
  createAnthropicModel({ model: 'claude-test', apiKey: 'sk-ant-test', baseURL: server.baseURL });
describeModelSpec('anthropic', {
  async succeeding() {
    const server = await anthropic.next();
    server.respond({ type: 'stream', text: ['Hel', 'lo.'], usage: { inputTokens: 9, outputTokens: 2 } });
    return anthropicModel(server);
  },
  async failing() {
    const server = await anthropic.next();
    server.respond({
      type: 'http-error',
      status: 400,
      body: { type: 'error', error: { type: 'invalid_request_error', message: 'bad request' } },
    });
    return anthropicModel(server);
  },
  async hanging() {
    const server = await anthropic.next();
    server.respond({ type: 'hang' });
    return anthropicModel(server);
  },
  reportsUsage: true,
  prepares: true,
  afterEach: () => anthropic.done(),
});

const fakeCli = fileURLToPath(new URL('./fixtures/fake-cli.mjs', import.meta.url));
const cli = (mode: string, format?: 'claude-stream-json') =>
  createCommandModel({
    command: process.execPath,
    args: [fakeCli, mode],
    modelId: `fake-${mode}`,
    killGraceMs: 100,
    ...(format ? { format } : {}),
  });
describeModelSpec('command (plain text)', {
  succeeding: () => cli('echo'),
  failing: () => cli('fail'),
  hanging: () => cli('hang'),
  reportsUsage: false,
  prepares: false,
});
describeModelSpec('command (claude stream-json)', {
  succeeding: () => cli('claude', 'claude-stream-json'),
  failing: () => cli('fail', 'claude-stream-json'),
  hanging: () => cli('hang', 'claude-stream-json'),
  reportsUsage: true,
  prepares: false,
});

const acpAgent = fileURLToPath(new URL('./fixtures/acp-agent.mjs', import.meta.url));
const acp = () => createAcpModel({ command: process.execPath, args: [acpAgent], killGraceMs: 100 });
describeModelSpec('acp', {
  succeeding: acp,
  failing: () => createAcpModel({ command: '/nonexistent/acp-agent' }),
  // The fixture agent waits for session/cancel when the prompt's last line ends in "hang".
  hanging: () => {
    const model = acp();
    return {
      ...model,
      doStream: (request, options) =>
        model.doStream(
          { ...request, messages: [...request.messages, { role: 'user', content: 'hang' }] },
          options,
        ),
    };
  },
  reportsUsage: false,
  prepares: true,
});

describeModelSpec('local', {
  succeeding: () => createLocalModel(),
  cannotFail: 'the offline model has no upstream to fail',
  // Its replies are instant: the suite aborts it at its first event instead.
  hanging: () => createLocalModel(),
  reportsUsage: true,
  prepares: false,
});

describeModelSpec('scripted', {
  succeeding: () =>
    createScriptedModel({ steps: [{ text: ['Hel', 'lo.'], usage: { inputTokens: 3, outputTokens: 2 } }] }),
  failing: () =>
    createScriptedModel({ steps: [{ error: { code: 'PROVIDER_UNAVAILABLE', message: 'down' } }] }),
  hanging: () => createScriptedModel({ steps: [{ hang: true }] }),
  reportsUsage: true,
  prepares: false,
});
