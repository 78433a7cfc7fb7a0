import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { App } from './App';
import { installConsoleApi } from './engine/consoleApi';
import { createEngine } from './engine/connect';
import { browserRunStore } from './runs/keptRunStore';
import { startKeptRuns } from './runs/runsActions';
import { startPlayground } from './state/startup';
import './styles.css';

const container = document.getElementById('root');
if (!container) throw new Error('index.html has no #root element');

// Started once per page, outside React: StrictMode runs effects twice, an engine must not.
installConsoleApi();
void startPlayground(createEngine);
void startKeptRuns(browserRunStore());

createRoot(container).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
