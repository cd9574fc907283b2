// studio console enhancements. Every page works without this file: it follows the jobs page's event
// stream to update job rows in place, and shows copy buttons next to read-only secrets and texts.
(function () {
  'use strict';

  // Live jobs: the rows of #job-rows follow the server-sent events of data-job-stream.
  function followJobs() {
    var rows = document.getElementById('job-rows');
    if (!rows || !window.EventSource) return;
    var url = rows.getAttribute('data-job-stream');
    if (!url) return;
    var note = document.getElementById('live-note');
    var announcer = document.getElementById('job-announcer');
    var source = new EventSource(url);
    source.addEventListener('open', function () {
      if (note) note.textContent = note.getAttribute('data-live-text') || 'Live: the list updates as jobs progress.';
    });
    source.addEventListener('error', function () {
      if (note) note.textContent = note.getAttribute('data-paused-text') || 'Live updates paused; reconnecting. Use Refresh to reload the list.';
    });
    source.addEventListener('job', function (ev) {
      var job;
      try { job = JSON.parse(ev.data); } catch (e) { return; }
      if (!job || !job.jobId) return;
      update(rows, job, announcer);
    });
  }

  function findRow(rows, id) {
    for (var i = 0; i < rows.rows.length; i++) {
      if (rows.rows[i].getAttribute('data-job-id') === id) return rows.rows[i];
    }
    return null;
  }

  function cell(row, cls) {
    return row.querySelector('.' + cls);
  }

  function newRow(rows, job) {
    var row = document.createElement('tr');
    row.setAttribute('data-job-id', job.jobId);
    var created = document.createElement('td');
    created.setAttribute('data-label', 'Created');
    created.textContent = job.created || '';
    var id = document.createElement('td');
    id.setAttribute('data-label', 'Job');
    var code = document.createElement('code');
    code.title = job.jobId;
    code.textContent = job.jobId.slice(0, 8);
    id.appendChild(code);
    row.appendChild(created);
    row.appendChild(id);
    [['job-status', 'Status'], ['job-progress', 'Progress'], ['job-result', 'Result']].forEach(function (c) {
      var td = document.createElement('td');
      td.className = c[0];
      td.setAttribute('data-label', c[1]);
      row.appendChild(td);
    });
    rows.insertBefore(row, rows.firstChild);
    var empty = document.getElementById('no-jobs');
    if (empty) empty.remove();
    return row;
  }

  function update(rows, job, announcer) {
    var row = findRow(rows, job.jobId) || newRow(rows, job);
    var status = cell(row, 'job-status');
    var before = status.textContent.trim();
    var badge = document.createElement('span');
    badge.className = 'badge badge-' + job.status;
    badge.textContent = job.status;
    status.replaceChildren(badge);
    var progress = cell(row, 'job-progress');
    if (job.error) {
      var err = document.createElement('span');
      err.className = 'error-text';
      err.textContent = job.error;
      progress.replaceChildren(err);
    } else {
      progress.textContent = job.progress || '';
    }
    var result = cell(row, 'job-result');
    if (job.cdn_url && !result.querySelector('img') && /^https?:\/\//.test(job.cdn_url)) {
      var link = document.createElement('a');
      link.href = job.cdn_url;
      var img = document.createElement('img');
      img.className = 'thumb';
      img.src = job.cdn_url;
      img.alt = 'Result of job ' + job.jobId.slice(0, 8);
      link.appendChild(img);
      result.replaceChildren(link);
    }
    if (announcer && before !== job.status && (job.status === 'done' || job.status === 'failed')) {
      announcer.textContent = 'Job ' + job.jobId.slice(0, 8) + ' ' + job.status + '.';
    }
  }

  // Copy buttons: <button data-copy="element-id" hidden> next to a read-only field.
  function copyButtons() {
    var buttons = document.querySelectorAll('button[data-copy]');
    Array.prototype.forEach.call(buttons, function (btn) {
      if (!navigator.clipboard) return;
      btn.hidden = false;
      var label = btn.textContent;
      btn.addEventListener('click', function () {
        var target = document.getElementById(btn.getAttribute('data-copy'));
        if (!target) return;
        var text = 'value' in target ? target.value : target.textContent;
        navigator.clipboard.writeText(text).then(function () {
          btn.textContent = document.documentElement.lang === 'zh-CN' ? '已复制' : 'Copied';
          setTimeout(function () { btn.textContent = label; }, 2000);
        });
      });
    });
  }

  function start() {
    followJobs();
    copyButtons();
  }
  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', start);
  } else {
    start();
  }
})();
