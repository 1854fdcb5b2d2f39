import { describe, expect, it } from 'vitest';
import { createPolicy } from '../../src/tools/index.js';

describe('policy', () => {
  it('allows by default and denies a matching rule with its reason', () => {
    const policy = createPolicy({
      policies: [
        {
          name: 'no-shell',
          rules: [{ target: 'tool', target_id: 'bash', action: 'deny', reason: 'no shell here' }],
        },
      ],
    });
    expect(policy.check({ targetId: 'read_file', agentId: 'main' })).toEqual({ allowed: true });
    expect(policy.check({ targetId: 'bash', agentId: 'main' })).toEqual({
      allowed: false,
      reason: 'no shell here',
      rule: 'no-shell#0',
    });
  });

  it('matches agent and resource globs; a resource rule never matches a call without a resource', () => {
    const policy = createPolicy({
      policies: [
        {
          name: 'p',
          rules: [
            { target_id: 'write_file', agent: 'guest-*', action: 'deny' },
            { target_id: '*_file', resource: 'secrets/*', action: 'deny', reason: 'secrets are off limits' },
          ],
        },
      ],
    });
    expect(policy.check({ targetId: 'write_file', agentId: 'guest-7', resource: 'notes.md' }).allowed).toBe(
      false,
    );
    expect(policy.check({ targetId: 'write_file', agentId: 'main', resource: 'notes.md' }).allowed).toBe(
      true,
    );
    expect(
      policy.check({ targetId: 'read_file', agentId: 'main', resource: 'secrets/key.txt' }),
    ).toMatchObject({
      allowed: false,
      reason: 'secrets are off limits',
    });
    expect(policy.check({ targetId: 'read_file', agentId: 'main' }).allowed).toBe(true);
  });

  it('deny wins over allow regardless of order; default deny needs an allow; disabled policies do nothing', () => {
    const policy = createPolicy({
      default_action: 'deny',
      policies: [
        { name: 'allow-all-files', rules: [{ target_id: '*_file', action: 'allow' }] },
        { name: 'but-not-write', rules: [{ target_id: 'write_file', action: 'deny' }] },
        { name: 'off', enabled: false, rules: [{ target_id: 'grep', action: 'allow' }] },
      ],
    });
    expect(policy.check({ targetId: 'read_file' })).toEqual({ allowed: true, rule: 'allow-all-files#0' });
    expect(policy.check({ targetId: 'write_file' }).allowed).toBe(false);
    expect(policy.check({ targetId: 'grep' })).toMatchObject({
      allowed: false,
      reason: expect.stringContaining('default_action: deny'),
    });
  });

  it('keeps tool, node and context targets apart', () => {
    const policy = createPolicy({
      policies: [{ name: 'n', rules: [{ target: 'node', target_id: 'deploy', action: 'deny' }] }],
    });
    expect(policy.check({ target: 'node', targetId: 'deploy' }).allowed).toBe(false);
    expect(policy.check({ target: 'tool', targetId: 'deploy' }).allowed).toBe(true);
  });

  it('rejects a malformed policy file', () => {
    expect(() =>
      createPolicy({ policies: [{ name: 'x', rules: [{ action: 'maybe' as 'allow' }] }] }),
    ).toThrow();
  });

  it('asks when a rule asks and none denies; deny still wins', () => {
    const policy = createPolicy({
      policies: [
        {
          name: 'careful',
          rules: [
            { target_id: 'write_*', action: 'ask', reason: 'writes need a yes' },
            { target_id: 'write_file', action: 'allow' },
            { target_id: 'write_secret', action: 'deny' },
          ],
        },
      ],
    });
    expect(policy.check({ targetId: 'write_file' })).toEqual({
      allowed: true,
      ask: true,
      reason: 'writes need a yes',
      rule: 'careful#0',
    });
    expect(policy.check({ targetId: 'write_secret' }).allowed).toBe(false);
    expect(policy.check({ targetId: 'read_file' })).toEqual({ allowed: true });
    expect(createPolicy({ default_action: 'ask' }).check({ targetId: 'x' })).toMatchObject({ ask: true });
  });
});
