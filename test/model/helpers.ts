import { afterEach, beforeEach, expect } from 'vitest';
import type { ModelRequest, ModelStreamEvent } from '../../src/model/spec.js';

/** The one-message request the provider tests send unless a test needs more. */
export const hiRequest: ModelRequest = { messages: [{ role: 'user', content: 'Hi' }] };

/** A retry sleep that returns at once, so backoff does not slow the tests. */
export const noWait = async (): Promise<void> => {};

export async function collect(stream: AsyncIterable<ModelStreamEvent>): Promise<ModelStreamEvent[]> {
  const events: ModelStreamEvent[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

interface FakeProviderServer {
  pendingResponses(): number;
  close(): Promise<void>;
}

/**
 * Starts a fresh fake provider server before each test of the enclosing describe and hands it to `use`;
 * after each test it checks that every scripted response was consumed, then closes the server.
 */
export function useFakeServer<S extends FakeProviderServer>(
  start: () => Promise<S>,
  use: (server: S) => void,
): void {
  let server: S;
  beforeEach(async () => {
    server = await start();
    use(server);
  });
  afterEach(async () => {
    expect(server.pendingResponses()).toBe(0);
    await server.close();
  });
}
