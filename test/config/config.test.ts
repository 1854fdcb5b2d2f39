import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'agentd-config-'));
}

describe('loadConfig', () => {
  it('uses defaults with no file and no env', () => {
    const cwd = tempDir();
    const config = loadConfig({ cwd, env: {} });
    expect(config.host).toBe('127.0.0.1');
    expect(config.port).toBe(7777);
    expect(config.home).toBe(join(cwd, '.agentd'));
    expect(config.model).toBeUndefined();
    expect(config.features).toEqual({ agent_runtime_v1: true, memory_v1: true, workers_v1: true });
  });

  it('layers file < env < overrides', () => {
    const cwd = tempDir();
    writeFileSync(
      join(cwd, 'agentd.yaml'),
      'port: 8000\nmodel: openai/gpt-4o\nfeatures:\n  workers_v1: false\n',
    );
    const config = loadConfig({
      cwd,
      env: { AGENTD_PORT: '9000', AGENTD_MODEL: 'local/x' },
      overrides: { port: 9100 },
    });
    expect(config.port).toBe(9100);
    expect(config.model).toBe('local/x');
    expect(config.features.workers_v1).toBe(false);
    expect(config.features.memory_v1).toBe(true);
  });

  it('rejects unknown keys and bad values naming the path', () => {
    const cwd = tempDir();
    writeFileSync(join(cwd, 'agentd.yaml'), 'port: "high"\n');
    expect(() => loadConfig({ cwd, env: {} })).toThrow(/port/);
    writeFileSync(join(cwd, 'agentd.yaml'), 'prot: 1\n');
    expect(() => loadConfig({ cwd, env: {} })).toThrow(/prot/);
  });

  it('resolves provider credentials from env and files and lists them as secrets', () => {
    const cwd = tempDir();
    const keyFile = join(cwd, 'anthropic.key');
    writeFileSync(keyFile, 'sk-ant-file-secret\n');
    chmodSync(keyFile, 0o644);
    writeFileSync(
      join(cwd, 'agentd.yaml'),
      [
        'provider_credentials:',
        '  - id: main_openai',
        '    provider: openai',
        '    auth: { type: api_key, source: env, env_var: MY_OPENAI }',
        '    config: { base_url: "http://127.0.0.1:1/v1" }',
        '  - id: claude',
        '    provider: anthropic',
        '    auth: { type: api_key, source: file, file_path: anthropic.key }',
      ].join('\n'),
    );
    const config = loadConfig({ cwd, env: { MY_OPENAI: 'sk-env-secret', AGENTD_TOKEN: 'tok-secret' } });
    expect(
      config.credentials.map((credential) => [credential.id, credential.apiKey, credential.source]),
    ).toEqual([
      ['main_openai', 'sk-env-secret', 'env:MY_OPENAI'],
      ['claude', 'sk-ant-file-secret', `file:${keyFile}`],
    ]);
    expect(config.credentials[0]!.baseUrl).toBe('http://127.0.0.1:1/v1');
    expect(config.secrets).toEqual(
      expect.arrayContaining(['sk-env-secret', 'sk-ant-file-secret', 'tok-secret']),
    );
    expect(config.warnings.join('\n')).toMatch(/readable by group or others/);
  });

  it('picks up plain OPENAI_API_KEY and ANTHROPIC_API_KEY', () => {
    const config = loadConfig({ cwd: tempDir(), env: { ANTHROPIC_API_KEY: 'sk-ant-plain' } });
    expect(config.credentials).toEqual([
      { id: 'anthropic', provider: 'anthropic', apiKey: 'sk-ant-plain', source: 'env:ANTHROPIC_API_KEY' },
    ]);
  });

  it('fails clearly on a missing explicit config file', () => {
    expect(() => loadConfig({ cwd: tempDir(), env: {}, configPath: 'nope.yaml' })).toThrow(/does not exist/);
  });
});
