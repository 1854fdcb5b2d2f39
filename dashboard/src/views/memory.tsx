import { useEffect, useState } from 'preact/hooks';
import { errorText, timeOf, useGateway } from '../context.js';

interface MemoryItem {
  kind: 'summary' | 'entry';
  id?: string | number;
  memoryId?: string | number;
  role?: string;
  state?: string;
  content?: string;
  text?: string;
  timestamp?: number;
  createdAt?: number;
  tier?: string;
  score?: number;
  [key: string]: unknown;
}

function idOf(item: MemoryItem): string {
  return String(item.memoryId ?? item.id ?? '');
}

export function MemoryView() {
  const gateway = useGateway();
  const [sessions, setSessions] = useState<string[]>(['agent:main:main']);
  const [sessionKey, setSessionKey] = useState('agent:main:main');
  const [items, setItems] = useState<MemoryItem[]>([]);
  const [topic, setTopic] = useState('');
  const [mode, setMode] = useState<'browse' | 'search' | 'recall'>('browse');
  const [error, setError] = useState('');

  useEffect(() => {
    gateway.call('sessions.list', { limit: 100, includeArchived: true }).then((result) => {
      const keys = (result.sessions ?? []).map((session: any) => session.key as string);
      setSessions([...new Set(['agent:main:main', ...keys])]);
    });
  }, []);

  const browse = (key = sessionKey) => {
    setMode('browse');
    gateway.call('memory.query', { sessionKey: key, kind: 'all', limit: 128, includeArchived: true }).then(
      (result) => {
        setItems(result.items);
        setError('');
      },
      (failure) => setError(errorText(failure)),
    );
  };
  useEffect(() => browse(sessionKey), [sessionKey]);

  const search = (event: Event) => {
    event.preventDefault();
    if (!topic.trim()) return browse();
    setMode('search');
    gateway
      .call('memory.query', {
        sessionKey,
        topic: topic.trim(),
        kind: 'all',
        limit: 50,
        includeArchived: true,
      })
      .then(
        (result) => setItems(result.items),
        (failure) => setError(errorText(failure)),
      );
  };
  const recall = () => {
    setMode('recall');
    gateway.call('memory.recall', { sessionKey, limit: 50, includeArchived: true }).then(
      (result) => setItems(result.items),
      (failure) => setError(errorText(failure)),
    );
  };

  return (
    <div class="stack">
      <section class="card" aria-label="Memory">
        <div class="row between wrap">
          <h2>Memory</h2>
          <select
            aria-label="Session"
            value={sessionKey}
            onChange={(event) => setSessionKey((event.target as HTMLSelectElement).value)}
          >
            {sessions.map((key) => (
              <option key={key} value={key}>
                {key}
              </option>
            ))}
          </select>
        </div>
        <form class="row wrap" onSubmit={search}>
          <input
            aria-label="Recall search"
            placeholder="Search this session's memory by topic"
            value={topic}
            onInput={(event) => setTopic((event.target as HTMLInputElement).value)}
          />
          <button type="submit" class="primary">
            Search
          </button>
          <button type="button" onClick={recall}>
            Recall
          </button>
          <button type="button" class="ghost" onClick={() => browse()}>
            All entries
          </button>
        </form>
        {error && (
          <p class="error" role="alert">
            {error}
          </p>
        )}
        <p class="muted small">
          {mode === 'browse'
            ? 'Entries by MemoryID'
            : mode === 'search'
              ? `Matches for “${topic}”`
              : 'What recall would bring back'}{' '}
          · {items.length} items
        </p>
        <div class="table-wrap">
          <table class="memory-table">
            <thead>
              <tr>
                <th>MemoryID</th>
                <th>Kind</th>
                <th>Role</th>
                <th>State</th>
                <th>Content</th>
              </tr>
            </thead>
            <tbody>
              {items.length === 0 && (
                <tr>
                  <td colSpan={5} class="muted">
                    Nothing here yet.
                  </td>
                </tr>
              )}
              {items.map((item, index) => (
                <tr key={`${idOf(item)}-${index}`} class={item.state === 'tombstone' ? 'tombstone' : ''}>
                  <td class="mono">{idOf(item)}</td>
                  <td>{item.kind}</td>
                  <td>{item.role ?? '—'}</td>
                  <td>
                    <span class={`badge mem-${item.state ?? item.kind}`}>
                      {item.state ?? (item.kind === 'summary' ? 'summary' : '—')}
                    </span>
                  </td>
                  <td>
                    {String(item.content ?? item.text ?? '')}
                    {(item.timestamp || item.createdAt) && (
                      <span class="muted small">
                        {' '}
                        · {timeOf((item.timestamp ?? item.createdAt) as number)}
                      </span>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </section>
    </div>
  );
}
