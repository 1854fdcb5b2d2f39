/** An event of the stream (its unfinished line and the data lines before it) ran past the limit. */
export class EventTooLongError extends Error {
  constructor(maxEventChars: number) {
    super(`an event of the stream is longer than ${maxEventChars} characters`);
    this.name = 'EventTooLongError';
  }
}

/** One server-sent event: its `event` field (null when it had none) and its data lines joined by `\n`. */
export interface ServerSentEvent {
  event: string | null;
  data: string;
}

/**
 * The events of a `text/event-stream` body, read as the providers' SDKs read one: lines end at `\n`, `\r\n`
 * or `\r`; a blank line dispatches the event when it had an `event` or `data` field; a line starting with
 * `:` is a comment; one space after a field's colon is dropped; other fields are ignored; an event the body
 * ends without a blank line after is not dispatched. `body` yields bytes (a Node stream or a web
 * `ReadableStream`); a character split between two chunks is decoded whole. An event longer than
 * `maxEventChars`, its data lines and the line not ended yet (a server that never ends one would fill the
 * memory), throws.
 */
export async function* serverSentEvents(
  body: AsyncIterable<Uint8Array | string>,
  maxEventChars: number,
): AsyncGenerator<ServerSentEvent, void, undefined> {
  const decoder = new TextDecoder();
  const reader = createEventReader(maxEventChars);
  for await (const chunk of body) {
    const events = reader.read(typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true }));
    for (const event of events) yield event;
  }
  for (const event of reader.read(decoder.decode(), true)) yield event;
}

/** Lines to events, text chunk by text chunk; `final` with the last (a `\r` ending it then ends a line). */
function createEventReader(maxEventChars: number): {
  read(text: string, final?: boolean): ServerSentEvent[];
} {
  /** The line not ended yet: no line end in it but perhaps a last `\r` (see `lineEnd`). */
  let buffered = '';
  let event: string | null = null;
  let data: string[] = [];
  let dataChars = 0;
  return {
    read(text, final = false) {
      // What was buffered has been searched already: only a last `\r` may still end a line.
      const searched =
        buffered.charCodeAt(buffered.length - 1) === 13 ? buffered.length - 1 : buffered.length;
      buffered += text;
      const events: ServerSentEvent[] = [];
      let start = 0;
      let from = searched;
      for (;;) {
        const end = lineEnd(buffered, from, final);
        if (end === -1) break;
        const line = buffered.slice(start, end);
        start = end + (buffered.charCodeAt(end) === 13 && buffered.charCodeAt(end + 1) === 10 ? 2 : 1);
        from = start;
        if (line === '') {
          if (event !== null || data.length > 0) {
            events.push({ event, data: data.join('\n') });
            event = null;
            data = [];
            dataChars = 0;
          }
          continue;
        }
        if (line.charCodeAt(0) === 58) continue; // ':' starts a comment
        const colon = line.indexOf(':');
        const field = colon === -1 ? line : line.slice(0, colon);
        let value = colon === -1 ? '' : line.slice(colon + 1);
        if (value.charCodeAt(0) === 32) value = value.slice(1);
        if (field === 'data') {
          data.push(value);
          dataChars += value.length + 1;
        } else if (field === 'event') event = value;
      }
      buffered = start === 0 ? buffered : buffered.slice(start);
      if (buffered.length + dataChars > maxEventChars) throw new EventTooLongError(maxEventChars);
      return events;
    },
  };
}

/**
 * Index of the next `\r` or `\n` at or after `from`, or -1. A `\r` ending the text may be the first half of
 * a `\r\n` split between chunks, so it counts only in the `final` text.
 */
function lineEnd(text: string, from: number, final: boolean): number {
  for (let index = from; index < text.length; index++) {
    const code = text.charCodeAt(index);
    if (code === 10) return index;
    if (code === 13) return index === text.length - 1 && !final ? -1 : index;
  }
  return -1;
}
