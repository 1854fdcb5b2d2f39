import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { createRuntime, type Runtime } from '../../src/runtime.js';
import { startFakeAnthropicServer } from '../helpers/fake-anthropic-server.js';
import { startFakeOpenAIServer } from '../helpers/fake-openai-server.js';
import { captureLog, tempHome } from '../runtime/helpers.js';

/**
 * A key configured for a private server must reach that server and nothing else. Server A is where the
 * environment points (the provider's default as far as this process knows); server B is the one the
 * config entry names, together with its key.
 */

const privateKey = 'sk-private-server-b-0123456789';
const publicKey = 'sk-public-default-0123456789';

let runtime: Runtime | undefined;
const closers: Array<() => Promise<void>> = [];

afterEach(async () => {
  await runtime?.close();
  runtime = undefined;
  for (const close of closers.splice(0)) await close();
});

async function startWith(yaml: string, env: NodeJS.ProcessEnv): Promise<Runtime> {
  const home = tempHome('agentd-sec-provider-');
  writeFileSync(join(home, 'agentd.yaml'), yaml);
  const fullEnv = { ...env, AGENTD_HOME: home };
  const config = loadConfig({ cwd: home, env: fullEnv });
  return createRuntime({ config, env: fullEnv, logDestination: captureLog().stream });
}

describe('provider_credentials reach the client they configure', () => {
  it('openai: a chat turn goes to the configured base_url with the configured key, never the env default', async () => {
    const serverA = await startFakeOpenAIServer();
    const serverB = await startFakeOpenAIServer();
    closers.push(serverA.close, serverB.close);
    serverA.respond({ type: 'stream', text: ['wrong server'] });
    serverB.respond({ type: 'stream', text: ['private ', 'answer'] });
    runtime = await startWith(
      [
        'model: openai/private-model',
        'provider_credentials:',
        '  - id: private-vllm',
        '    provider: openai',
        '    auth: { type: api_key, source: env, env_var: PRIVATE_VLLM_KEY }',
        `    config: { base_url: "${serverB.baseURL}" }`,
        '',
      ].join('\n'),
      { OPENAI_BASE_URL: serverA.baseURL, OPENAI_API_KEY: publicKey, PRIVATE_VLLM_KEY: privateKey },
    );
    const reply = await runtime.sendMessage({ text: 'hello', timeoutMs: 20_000 });
    expect(reply.status).toBe('completed');
    expect(reply.text).toBe('private answer');
    expect(serverA.requests).toHaveLength(0);
    expect(serverB.requests).toHaveLength(1);
    expect(serverB.requests[0]!.headers.authorization).toBe(`Bearer ${privateKey}`);
    expect(serverB.requests[0]!.body.model).toBe('private-model');
  });

  it('openai: a plain OPENAI_API_KEY still goes to OPENAI_BASE_URL when no entry names a base_url', async () => {
    const serverA = await startFakeOpenAIServer();
    closers.push(serverA.close);
    serverA.respond({ type: 'stream', text: ['env server'] });
    runtime = await startWith('model: openai/env-model\n', {
      OPENAI_BASE_URL: serverA.baseURL,
      OPENAI_API_KEY: publicKey,
    });
    const reply = await runtime.sendMessage({ text: 'hello', timeoutMs: 20_000 });
    expect(reply.text).toBe('env server');
    expect(serverA.requests[0]!.headers.authorization).toBe(`Bearer ${publicKey}`);
  });

  it('openai: default_model of the entry names the model when none is configured', async () => {
    const serverB = await startFakeOpenAIServer();
    closers.push(serverB.close);
    serverB.respond({ type: 'stream', text: ['ok'] });
    runtime = await startWith(
      [
        'provider_credentials:',
        '  - id: private-vllm',
        '    provider: openai',
        '    auth: { type: api_key, source: env, env_var: PRIVATE_VLLM_KEY }',
        `    config: { base_url: "${serverB.baseURL}", default_model: qwen2.5-7b }`,
        '',
      ].join('\n'),
      { PRIVATE_VLLM_KEY: privateKey },
    );
    expect(runtime.modelName).toBe('openai/qwen2.5-7b');
    const reply = await runtime.sendMessage({ text: 'hello', timeoutMs: 20_000 });
    expect(reply.text).toBe('ok');
    expect(serverB.requests[0]!.body.model).toBe('qwen2.5-7b');
    expect(serverB.requests[0]!.headers.authorization).toBe(`Bearer ${privateKey}`);
  });

  it('anthropic: a chat turn goes to the configured base_url with the configured key', async () => {
    const serverA = await startFakeAnthropicServer();
    const serverB = await startFakeAnthropicServer();
    closers.push(serverA.close, serverB.close);
    serverA.respond({ type: 'stream', text: ['wrong server'] });
    serverB.respond({ type: 'stream', text: ['from ', 'B'] });
    runtime = await startWith(
      [
        'model: anthropic/claude-test',
        'provider_credentials:',
        '  - id: gateway-proxy',
        '    provider: anthropic',
        '    auth: { type: api_key, source: env, env_var: PROXY_ANTHROPIC_KEY }',
        `    config: { base_url: "${serverB.baseURL}" }`,
        '',
      ].join('\n'),
      { ANTHROPIC_BASE_URL: serverA.baseURL, ANTHROPIC_API_KEY: publicKey, PROXY_ANTHROPIC_KEY: privateKey },
    );
    const reply = await runtime.sendMessage({ text: 'hello', timeoutMs: 20_000 });
    expect(reply.text).toBe('from B');
    expect(serverA.requests).toHaveLength(0);
    expect(serverB.requests).toHaveLength(1);
    const headers = serverB.requests[0]!.headers;
    expect(headers['x-api-key'] ?? headers.authorization).toMatch(new RegExp(`${privateKey}$`));
  });

  it('ollama: a configured base_url wins over OLLAMA_BASE_URL', async () => {
    const serverA = await startFakeOpenAIServer();
    const serverB = await startFakeOpenAIServer();
    closers.push(serverA.close, serverB.close);
    serverB.respond({ type: 'stream', text: ['llama here'] });
    runtime = await startWith(
      [
        'model: ollama/llama3.2',
        'provider_credentials:',
        '  - id: remote-ollama',
        '    provider: ollama',
        '    auth: { type: api_key, source: env, env_var: OLLAMA_PROXY_KEY }',
        `    config: { base_url: "${serverB.baseURL}" }`,
        '',
      ].join('\n'),
      { OLLAMA_BASE_URL: serverA.baseURL, OLLAMA_PROXY_KEY: privateKey },
    );
    const reply = await runtime.sendMessage({ text: 'hello', timeoutMs: 20_000 });
    expect(reply.text).toBe('llama here');
    expect(serverA.requests).toHaveLength(0);
    expect(serverB.requests[0]!.headers.authorization).toBe(`Bearer ${privateKey}`);
  });
});
