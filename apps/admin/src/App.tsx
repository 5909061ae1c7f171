import { useCallback, useState } from 'react';
import { Header } from './components/header';
import { KeyPrompt } from './components/key-prompt';
import { ServiceCharts } from './components/live-charts';
import type { HeldLock } from './components/lock-card';
import { QueueList } from './components/queue-list';
import { QueuePanel } from './components/queue-panel';
import { SchedulesPage } from './components/schedules-page';
import { useSchedulesRoute, useSelectedQueue, useSessionState } from './hooks';
import { ApiProvider, PermissionsProvider, useSession, type ConsoleSession } from './session';

export function App() {
  const session = useSession();
  return (
    <ApiProvider value={session.api}>
      <PermissionsProvider value={session.permissions}>
        {/* A new key remounts the console: every panel reloads with it, nothing of the old key's answers stays. */}
        <Console key={session.generation} session={session} />
      </PermissionsProvider>
    </ApiProvider>
  );
}

function Console({ session }: { session: ConsoleSession }) {
  const [selected, select] = useSelectedQueue();
  const schedules = useSchedulesRoute();
  const [refreshKey, setRefreshKey] = useState(0);
  const changed = useCallback(() => setRefreshKey((k) => k + 1), []);
  const [locks, setLocks] = useSessionState<Record<string, HeldLock>>('pushpop.admin.locks', {});

  const setHeld = useCallback(
    (queueId: string, lock: HeldLock | undefined) =>
      setLocks((all) => {
        const next = { ...all };
        if (lock) next[queueId] = lock;
        else delete next[queueId];
        return next;
      }),
    [setLocks],
  );

  const { kind } = session.session;
  const ready = kind === 'open' || kind === 'signed-in' || kind === 'unknown';
  return (
    <div className="app">
      <Header
        onOpenQueue={select}
        numbers={ready}
        identity={kind === 'signed-in' || kind === 'open' ? session.identity : undefined}
        onForget={kind === 'signed-in' ? session.forget : undefined}
      />
      {session.session.kind === 'key-needed' ? (
        <div className="body body-single">
          <KeyPrompt problem={session.session.problem} onKey={session.signIn} />
        </div>
      ) : !ready ? (
        <div className="body">
          <aside className="sidebar" />
          <main className="main" aria-busy="true" />
        </div>
      ) : (
        <div className="body">
          <aside className="sidebar">
            <QueueList selected={selected} onSelect={select} refreshKey={refreshKey} onChanged={changed} />
          </aside>
          <main className="main">
            {schedules ? (
              <SchedulesPage />
            ) : selected ? (
              <QueuePanel
                key={selected}
                queueId={selected}
                refreshKey={refreshKey}
                held={locks[selected]}
                onHeld={(lock) => setHeld(selected, lock)}
                onChanged={changed}
              />
            ) : (
              <div className="welcome">
                <h1>pushpop admin</h1>
                <p>Pick a queue on the left, or open one by id at the top: a queue that does not exist yet is created by its first push.</p>
                <ServiceCharts />
                <ul>
                  <li>See each priority’s segment chain: head, buffer, offloaded range and tail.</li>
                  <li>Push, pop, pop with acknowledgement, then acknowledge, extend or release the lock.</li>
                  <li>See and change a queue’s settings: segment layout, lock mode (exclusive or shared), max deliveries and dead-letter queue.</li>
                  <li>
                    <a href="#/schedules">Schedules</a>: recurring pushes by cron expression, with their next and last runs.
                  </li>
                  <li>
                    The HTTP API: <a href="/docs">Swagger UI</a> · <a href="/openapi.json">openapi.json</a>
                  </li>
                  <li>
                    From code: the TypeScript client <code>@pushpop/client</code> (a consumer that extends locks and drains on shutdown, a batching producer)
                    and its command line, e.g. <code>pushpop stats &lt;queue&gt;</code> or <code>pushpop consume &lt;queue&gt; -- ./handler.sh</code>; see
                    libs/client/README.md in the repository.
                  </li>
                </ul>
              </div>
            )}
          </main>
        </div>
      )}
    </div>
  );
}
