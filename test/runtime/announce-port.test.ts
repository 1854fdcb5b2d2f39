import { describe, expect, it } from 'vitest';
import type { ChatRunRecord } from '../../src/chat/index.js';
import { createAnnouncePort } from '../../src/runtime/announce-port.js';
import { AgentdError } from '../../src/util/index.js';

const input = {
  sessionKey: 'agent:main:heartbeat',
  agentId: 'main',
  text: 'check the queue',
  label: 'heartbeat',
};

describe('announce port', () => {
  it('refuses an announcement before the chat service is bound', () => {
    const port = createAnnouncePort();
    let caught: unknown;
    try {
      void port.announce(input);
    } catch (error) {
      caught = error;
    }
    expect(AgentdError.isInstance(caught) && caught.code).toBe('INTERNAL');
  });

  it('forwards announcements to the bound chat service', async () => {
    const port = createAnnouncePort();
    const seen: (typeof input)[] = [];
    const record = { runId: 'announce_1' } as ChatRunRecord;
    port.bind({
      announce: async (announcement) => {
        seen.push(announcement);
        return record;
      },
    });
    await expect(port.announce(input)).resolves.toBe(record);
    expect(seen).toEqual([input]);
  });

  it('refuses a second binding', () => {
    const port = createAnnouncePort();
    const chat = { announce: async () => ({ runId: 'x' }) as ChatRunRecord };
    port.bind(chat);
    expect(() => port.bind(chat)).toThrow(/already bound/);
  });
});
