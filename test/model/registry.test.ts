import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { completeModel } from '../../src/model/call.js';
import { contextWindowFor } from '../../src/model/context-windows.js';
import { defaultModelName, resolveModel } from '../../src/model/registry.js';
import { AgentdError } from '../../src/util/errors.js';
import { type FakeOpenAIServer, startFakeOpenAIServer } from '../helpers/fake-openai-server.js';

function configError(run: () => unknown): AgentdError {
  try {
    run();
  } catch (error) {
    if (AgentdError.isInstance(error)) return error;
    throw error;
  }
  throw new Error('expected an error');
}

describe('defaultModelName', () => {
  it('prefers AGENTD_MODEL, then OpenAI (key or base URL), then Anthropic, then local', () => {
    expect(defaultModelName({ AGENTD_MODEL: 'ollama/llama3.2', OPENAI_API_KEY: 'k' })).toBe(
      'ollama/llama3.2',
    );
    expect(defaultModelName({ OPENAI_API_KEY: 'k', ANTHROPIC_API_KEY: 'k' })).toBe('openai/gpt-4o-mini');
    expect(defaultModelName({ OPENAI_BASE_URL: 'http://127.0.0.1:8080/v1' })).toBe('openai/default');
    expect(defaultModelName({ ANTHROPIC_API_KEY: 'k' })).toBe('anthropic/claude-sonnet-4-5');
    expect(defaultModelName({}, { anthropic: { apiKey: 'from-file' } })).toBe('anthropic/claude-sonnet-4-5');
    expect(defaultModelName({ OPENAI_API_KEY: '  ' })).toBe('local/agentd-local');
  });
});

describe('resolveModel', () => {
  let server: FakeOpenAIServer;
  beforeEach(async () => {
    server = await startFakeOpenAIServer();
  });
  afterEach(async () => {
    await server.close();
  });

  it('uses OPENAI_BASE_URL without a key for an OpenAI-compatible server', async () => {
    server.respond({ type: 'stream', text: ['from the compatible server'] });
    const model = resolveModel('openai/qwen2.5', { env: { OPENAI_BASE_URL: server.baseURL } });
    expect(model).toMatchObject({ provider: 'openai', modelId: 'qwen2.5', contextWindowTokens: 32_768 });
    expect((await completeModel(model, { messages: [{ role: 'user', content: 'hi' }] })).text).toBe(
      'from the compatible server',
    );
    expect(server.requests[0]!.body.model).toBe('qwen2.5');
  });

  it('maps ollama/<model> to the Ollama OpenAI endpoint (OLLAMA_BASE_URL, /v1 added) with no key', async () => {
    server.respond({ type: 'stream', text: ['llama says hi'] });
    const model = resolveModel('ollama/llama3.2', {
      env: { OLLAMA_BASE_URL: server.baseURL.replace(/\/v1$/, '') },
    });
    expect(model.provider).toBe('ollama');
    expect((await completeModel(model, { messages: [{ role: 'user', content: 'hi' }] })).text).toBe(
      'llama says hi',
    );
    expect(server.requests[0]!.path).toBe('/v1/chat/completions');
  });

  it("sends a configured key only to its entry's base URL; an entry without one uses OPENAI_BASE_URL", async () => {
    const elsewhere = await startFakeOpenAIServer();
    try {
      server.respond({ type: 'stream', text: ['entry'] }, { type: 'stream', text: ['env url'] });
      const env = { OPENAI_BASE_URL: elsewhere.baseURL, OPENAI_API_KEY: 'sk-env-key' };
      const pinned = resolveModel('openai/m', {
        env,
        credentials: { openai: { apiKey: 'sk-entry-key', baseUrl: server.baseURL } },
      });
      await completeModel(pinned, { messages: [{ role: 'user', content: 'hi' }] });
      expect(server.requests[0]!.headers.authorization).toBe('Bearer sk-entry-key');
      expect(elsewhere.requests).toHaveLength(0);
      const unpinned = resolveModel('openai/m', {
        env: { OPENAI_BASE_URL: server.baseURL },
        credentials: { openai: { apiKey: 'sk-entry-key' } },
      });
      await completeModel(unpinned, { messages: [{ role: 'user', content: 'hi' }] });
      expect(server.requests[1]!.headers.authorization).toBe('Bearer sk-entry-key');
    } finally {
      await elsewhere.close();
    }
  });

  it('names the default model from an entry: default_model, else `default` for its own server', () => {
    expect(defaultModelName({}, { openai: { apiKey: 'k', baseUrl: 'http://10.0.0.5/v1' } })).toBe(
      'openai/default',
    );
    expect(defaultModelName({}, { openai: { apiKey: 'k', defaultModel: 'qwen2.5-7b' } })).toBe(
      'openai/qwen2.5-7b',
    );
    expect(defaultModelName({}, { anthropic: { apiKey: 'k', defaultModel: 'claude-test' } })).toBe(
      'anthropic/claude-test',
    );
    expect(defaultModelName({}, { ollama: { defaultModel: 'llama3.2' } })).toBe('ollama/llama3.2');
  });

  it('resolves local, command presets, and credentials from the config', () => {
    expect(resolveModel('local/agentd-local', { env: {} })).toMatchObject({
      provider: 'local',
      modelId: 'agentd-local',
    });
    expect(resolveModel('command/claude', { env: {} })).toMatchObject({
      provider: 'command',
      modelId: 'claude',
    });
    expect(
      resolveModel('anthropic/claude-sonnet-4-5', {
        env: {},
        credentials: { anthropic: { apiKey: 'sk-x' } },
      }),
    ).toMatchObject({
      provider: 'anthropic',
      contextWindowTokens: 200_000,
    });
    expect(resolveModel('openai/meta-llama/llama-3-8b', { env: { OPENAI_API_KEY: 'k' } }).modelId).toBe(
      'meta-llama/llama-3-8b',
    );
  });

  it('explains which variable to set, with INVALID_CONFIG and never a secret', () => {
    const missingOpenAI = configError(() =>
      resolveModel('openai/gpt-4o', { env: { ANTHROPIC_API_KEY: 'sk-ant-secret' } }),
    );
    expect(missingOpenAI).toMatchObject({ code: 'INVALID_CONFIG', fault: 'user' });
    expect(missingOpenAI.message).toContain('OPENAI_API_KEY');
    expect(missingOpenAI.message).not.toContain('sk-ant-secret');
    expect(configError(() => resolveModel('anthropic/claude', { env: {} })).message).toContain(
      'ANTHROPIC_API_KEY',
    );
    expect(configError(() => resolveModel('mystery/model', { env: {} })).message).toContain(
      "Unknown model provider 'mystery'",
    );
    expect(configError(() => resolveModel('gpt-4o', { env: {} })).message).toContain('provider/model');
    expect(configError(() => resolveModel('command/nope', { env: {} })).message).toContain(
      'Known: claude, gemini',
    );
  });
});

describe('contextWindowFor', () => {
  it('knows model families and defaults to 128k', () => {
    expect(contextWindowFor('gpt-4o-mini')).toBe(128_000);
    expect(contextWindowFor('gpt-4.1-mini')).toBe(1_047_576);
    expect(contextWindowFor('claude-sonnet-4-5')).toBe(200_000);
    expect(contextWindowFor('openai/gpt-4o')).toBe(128_000);
    expect(contextWindowFor('something-new')).toBe(128_000);
  });
});
