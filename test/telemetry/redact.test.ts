import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createRedactor } from '../../src/telemetry/index.js';
import { createToolRegistry, defineTool } from '../../src/tools/index.js';

describe('secret redaction', () => {
  const redactor = createRedactor(['configured-key-123']);

  it('removes configured secrets and well-known credential shapes, keeping ordinary text', () => {
    const text = [
      'key configured-key-123 here',
      `sk-ant-api03-${'x'.repeat(30)}`,
      `ghp_${'A'.repeat(36)}`,
      'AKIAABCDEFGHIJKLMNOP',
      'Authorization: Bearer abcdefghijklmnopqrstuvwxyz',
      '-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAK\n-----END RSA PRIVATE KEY-----',
      'uses sk-learn and task-ids; ask-me',
    ].join('\n');
    expect(redactor.redactText(text)).toBe(
      [
        'key [REDACTED] here',
        '[REDACTED]',
        '[REDACTED]',
        '[REDACTED]',
        'Authorization: Bearer [REDACTED]',
        '[REDACTED]',
        'uses sk-learn and task-ids; ask-me',
      ].join('\n'),
    );
  });

  it('finds each credential shape alone in a string, whatever the case of Bearer and Basic', () => {
    const samples = [
      `sk-${'a'.repeat(24)}`,
      `sk-ant-${'b'.repeat(24)}`,
      `gho_${'C'.repeat(32)}`,
      `github_pat_${'d'.repeat(32)}`,
      'ASIAABCDEFGHIJKLMNOP',
      `xoxb-${'1'.repeat(12)}`,
      `bEaReR ${'e'.repeat(20)}`,
      `BASIC ${'f'.repeat(20)}`,
      '-----BEGIN OPENSSH PRIVATE KEY-----\nabc',
    ];
    for (const sample of samples) {
      const redacted = redactor.redactText(`before ${sample} after`);
      expect(redacted, sample).toContain('[REDACTED]');
      expect(redacted, sample).not.toContain(sample.slice(-12));
    }
  });

  it('returns a value with nothing to redact as it is, and copies only the way to what it redacts', () => {
    const clean = { type: 'run:text-delta', data: { text: 'hello', list: [1, 'two', { deep: 'three' }] } };
    expect(redactor.redactValue(clean)).toBe(clean);
    const input = {
      keep: { note: 'plain' },
      nested: { list: ['fine', 'uses configured-key-123', { token: 'abc' }] },
      apiKey: 'not-a-shape',
    };
    const snapshot = structuredClone(input);
    const out = redactor.redactValue(input);
    expect(out).toEqual({
      keep: { note: 'plain' },
      nested: { list: ['fine', 'uses [REDACTED]', { token: '[REDACTED]' }] },
      apiKey: '[REDACTED]',
    });
    expect(input).toEqual(snapshot);
    expect(out).not.toBe(input);
    expect(out.nested.list).not.toBe(input.nested.list);
    expect(out.keep).toBe(input.keep);
  });

  it('a registry with redaction scrubs every tool result and error message', async () => {
    const leaky = defineTool({
      name: 'leaky',
      description: 'returns what it is given',
      input: z.object({ text: z.string(), fail: z.boolean().default(false) }),
      async execute(args) {
        if (args.fail) throw new Error(`upstream said ${args.text}`);
        return { content: args.text, metadata: { note: 1 } };
      },
    });
    const registry = createToolRegistry([leaky], { redactText: redactor.redactText });
    const tool = registry.get('leaky')!;
    const context = {} as Parameters<typeof tool.execute>[1];
    expect(await tool.execute({ text: 'a configured-key-123 b', fail: false }, context)).toEqual({
      content: 'a [REDACTED] b',
      metadata: { note: 1 },
    });
    await expect(tool.execute({ text: 'configured-key-123', fail: true }, context)).rejects.toThrow(
      'upstream said [REDACTED]',
    );
  });
});
