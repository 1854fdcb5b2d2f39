import { _iterSSEMessages } from 'openai/core/streaming';
import { describe, expect, it } from 'vitest';
import { EventTooLongError, type ServerSentEvent, serverSentEvents } from '../../src/model/sse.js';

const encoder = new TextEncoder();

/** The bytes cut into pieces at `cuts` (byte offsets), as a socket might deliver them. */
function piecesOf(bytes: Uint8Array, cuts: number[]): Uint8Array[] {
  const pieces: Uint8Array[] = [];
  let from = 0;
  for (const cut of [...cuts, bytes.length]) {
    pieces.push(bytes.subarray(from, cut));
    from = cut;
  }
  return pieces;
}

async function* yieldEach(pieces: Uint8Array[]): AsyncGenerator<Uint8Array> {
  for (const piece of pieces) yield piece;
}

async function ours(pieces: Uint8Array[], maxEventChars = 1_000_000): Promise<ServerSentEvent[]> {
  const events: ServerSentEvent[] = [];
  for await (const event of serverSentEvents(yieldEach(pieces), maxEventChars)) events.push(event);
  return events;
}

/** What the `openai` SDK's own reader makes of the same pieces. */
async function theSdks(pieces: Uint8Array[]): Promise<ServerSentEvent[]> {
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const piece of pieces) controller.enqueue(piece);
      controller.close();
    },
  });
  const events: ServerSentEvent[] = [];
  for await (const event of _iterSSEMessages(new Response(body), new AbortController()))
    events.push({ event: event.event, data: event.data });
  return events;
}

const streams: Record<string, string> = {
  'chat chunks with \\n': 'data: {"a":1}\n\ndata: {"b":"é ✓ 😀"}\n\ndata: [DONE]\n\n',
  'CRLF and CR line ends': 'data: one\r\n\r\ndata: two\r\rdata: three\r\n\r\n',
  'data over several CRLF lines': 'data: a\r\ndata: b\r\nevent: e\r\n\r\n',
  'comments, fields without a colon or a space, unknown fields':
    ': keep-alive\n\nid: 7\nretry: 10\ndata\ndata:tight\nevent:error\nfoo: bar\n\n',
  'data over several lines and an event name': 'event: thread.run\ndata: first\ndata:  second\n\n',
  'a last event without the blank line after it': 'data: kept\n\ndata: unfinished\n',
  'blank lines with nothing before them': '\n\n\r\n: only a comment\n\ndata: x\n\n\n',
};

describe('server-sent events as the SDKs read them', () => {
  for (const [name, text] of Object.entries(streams)) {
    it(`reads "${name}" as the openai SDK does, however the bytes are cut`, async () => {
      const bytes = encoder.encode(text);
      const whole = await theSdks([bytes]);
      expect(whole.length).toBeGreaterThan(0);
      expect(await ours([bytes])).toEqual(whole);
      // Every single cut, and every pair of cuts 1–3 bytes apart (a character or a CRLF split in two).
      for (let cut = 1; cut < bytes.length; cut++) {
        expect(await ours(piecesOf(bytes, [cut])), `cut at ${cut}`).toEqual(whole);
        for (let gap = 1; gap <= 3 && cut + gap < bytes.length; gap++)
          expect(await ours(piecesOf(bytes, [cut, cut + gap])), `cuts at ${cut}, ${cut + gap}`).toEqual(
            whole,
          );
      }
      // One byte at a time.
      expect(
        await ours(
          piecesOf(
            bytes,
            Array.from({ length: bytes.length - 1 }, (_, index) => index + 1),
          ),
        ),
      ).toEqual(whole);
    });
  }

  it('stops at an event longer than the limit instead of keeping it in memory', async () => {
    const endless = encoder.encode(`data: ${'x'.repeat(4_000)}`);
    await expect(ours(piecesOf(endless, [1_000, 2_000, 3_000]), 2_500)).rejects.toBeInstanceOf(
      EventTooLongError,
    );
    // Lines that end, but an event that does not: its data lines count too.
    const endlessEvent = encoder.encode('data: 0123456789\n'.repeat(400));
    await expect(ours(piecesOf(endlessEvent, [3_000]), 2_500)).rejects.toBeInstanceOf(EventTooLongError);
    // Under the limit the same line is read once it ends.
    const ended = encoder.encode(`data: ${'x'.repeat(2_000)}\n\n`);
    expect(await ours(piecesOf(ended, [1_000]), 2_500)).toEqual([{ event: null, data: 'x'.repeat(2_000) }]);
  });
});
