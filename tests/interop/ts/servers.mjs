// The server processes an interop client starts or watches, shared by client.mjs and
// compact.mjs: the stdio server the SDK spawned (reaped at the end) and the `--http` server a
// client starts itself (its announced URL, then SIGTERM, then SIGKILL).
//
// `servers({ prefix, note, fail })` binds them to a client's reporting: `note(text)` for what
// is worth saying, `fail(label, detail)` for a failed check. `reporter(prefix)` is that
// reporting, the same for both clients.

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** A check that failed for the reason in its message (anything else thrown is unexpected). */
export class CheckFailed extends Error {}

/** The installed @modelcontextprotocol/sdk version, for the run's header ('unknown' if unread). */
export function sdkVersion() {
  try {
    // (the package's exports map routes `sdk/package.json` to a dist stub, so read the real one)
    const pkg = new URL('./node_modules/@modelcontextprotocol/sdk/package.json', import.meta.url);
    return JSON.parse(readFileSync(pkg, 'utf8')).version ?? 'unknown';
  } catch {
    return 'unknown'; // informational only
  }
}

/** PASS/FAIL/NOTE lines under `[prefix]`, counted for the closing summary. */
export function reporter(prefix) {
  let passed = 0;
  let failed = 0;
  return {
    ok(label, detail = '') {
      passed += 1;
      console.log(`[${prefix}] PASS ${label}${detail ? `: ${detail}` : ''}`);
    },
    fail(label, detail) {
      failed += 1;
      console.log(`[${prefix}] FAIL ${label}: ${detail}`);
    },
    note: (text) => console.log(`[${prefix}] NOTE ${text}`),
    /** Prints `prefix: N passed, M failed` and exits 0 only if something passed and nothing failed. */
    finish() {
      console.log(`${prefix}: ${passed} passed, ${failed} failed`);
      process.exit(failed === 0 && passed > 0 ? 0 : 1);
    },
  };
}

const ANNOUNCE = /listening on (http:\/\/\S+)/;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

export function servers({ prefix, note, fail }) {
  // stdio: the server the SDK spawned (a failed connect() forgets it).
  let childPid;
  // --http: the server this client started, as { child, exited: Promise<description> }.
  let httpServer;

  // Waits for the stdio server to go away (the SDK's close() escalates stdin EOF -> SIGTERM
  // after 2 s -> SIGKILL after 4 s), then forces it.
  async function reap() {
    if (childPid === undefined) return;
    for (let i = 0; i < 60 && alive(childPid); i++) await sleep(100);
    if (alive(childPid)) {
      note(`server pid ${childPid} still running after close; sending SIGKILL`);
      try {
        process.kill(childPid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }

  // Starts `cmd --http 127.0.0.1:0` and resolves to the URL it announces on stderr. The
  // server's other stderr lines are passed on to ours, prefixed `[server]`.
  function startHttpServer(cmd, timeoutMs) {
    const argv = [...cmd.slice(1), '--http', '127.0.0.1:0'];
    const shown = [cmd[0], ...argv].join(' ');
    const child = spawn(cmd[0], argv, { stdio: ['ignore', 'ignore', 'pipe'] });
    const exited = new Promise((resolve) => {
      child.once('error', (e) => resolve(`could not start: ${e.message}`));
      child.once('exit', (code, signal) => resolve(signal ? `killed by ${signal}` : `exit status ${code}`));
    });
    httpServer = { child, exited };
    return new Promise((resolve, reject) => {
      let url;
      let buf = '';
      const timer = setTimeout(
        () => reject(new Error(`${shown} did not print 'listening on http://...' within ${timeoutMs / 1000}s`)),
        timeoutMs,
      );
      child.stderr.setEncoding('utf8');
      child.stderr.on('data', (chunk) => {
        buf += chunk;
        let nl;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          process.stderr.write(`[server] ${line}\n`);
          const m = url === undefined ? ANNOUNCE.exec(line) : null;
          if (m) {
            url = m[1];
            clearTimeout(timer);
            console.log(`[${prefix}] server ${shown} (pid ${child.pid}) listening on ${url}`);
            resolve(url);
          }
        }
      });
      exited.then((how) => {
        clearTimeout(timer);
        reject(new Error(`${shown} ended before announcing its URL (${how})`));
      });
    });
  }

  // SIGTERM, up to 5 s to exit, then SIGKILL. A server that already exited by itself (it
  // should run until we stop it) is a failed check.
  async function stopHttpServer() {
    if (httpServer === undefined) return;
    const { child, exited } = httpServer;
    httpServer = undefined;
    if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) {
      if (child.pid !== undefined) fail('server', `the HTTP server exited by itself (${await exited})`);
      return;
    }
    child.kill('SIGTERM');
    if ((await Promise.race([exited, sleep(5000).then(() => undefined)])) === undefined) {
      note(`HTTP server pid ${child.pid} ignored SIGTERM for 5 s; sending SIGKILL`);
      child.kill('SIGKILL');
      await exited;
    }
  }

  return {
    reap,
    startHttpServer,
    stopHttpServer,
    spawned(pid) {
      childPid = pid;
    },
  };
}
