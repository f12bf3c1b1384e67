#!/usr/bin/env node
// forge cannot download solc here; this wrapper lets forge drive the pinned solc-js (npm `solc`)
// through the solc command-line interface that forge expects (--version, --standard-json).
'use strict';
const fs = require('fs');
const path = require('path');
const solc = require(path.join(__dirname, '..', 'node_modules', 'solc'));

const args = process.argv.slice(2);
if (args.includes('--version')) {
  const v = solc.version().replace('.Emscripten.clang', '.Linux.g++');
  process.stdout.write(`solc, the solidity compiler commandline interface\nVersion: ${v}\n`);
  process.exit(0);
}
let basePath = process.cwd();
const bi = args.indexOf('--base-path');
if (bi >= 0 && args[bi + 1]) basePath = args[bi + 1];
const includePaths = [];
args.forEach((a, i) => { if (a === '--include-path' && args[i + 1]) includePaths.push(args[i + 1]); });

function findImports(p) {
  for (const root of [basePath, ...includePaths, process.cwd()]) {
    const full = path.isAbsolute(p) ? p : path.join(root, p);
    if (fs.existsSync(full)) return { contents: fs.readFileSync(full, 'utf8') };
  }
  return { error: `File not found: ${p}` };
}

const input = fs.readFileSync(0, 'utf8');
process.stdout.write(solc.compile(input, { import: findImports }));
