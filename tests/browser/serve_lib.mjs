// What the browser tests share: `stepscope serve DIR` on a free port (resolves to its URL once
// the server prints it) and headless Chromium (Debian's, or $CHROMIUM).
import { spawn } from 'node:child_process';
import { chromium } from 'playwright-core';

export async function startServe(binary, dir) {
  const server = spawn(binary, ['serve', dir, '--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise((resolve, reject) => {
    let out = '';
    server.stdout.on('data', (chunk) => {
      out += chunk;
      const m = out.match(/ at (http:\/\/\S+\/)/);
      if (m) resolve(m[1]);
    });
    server.on('exit', (code) => reject(new Error(`stepscope serve exited with ${code}: ${out}`)));
    setTimeout(() => reject(new Error(`stepscope serve printed no URL: ${out}`)), 20000);
  });
  return { server, url };
}

export function launchChromium() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
  });
}
