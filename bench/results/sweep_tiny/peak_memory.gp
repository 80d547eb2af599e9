set encoding utf8
set title 'tiny_cpu.yaml: peak memory per rank' noenhanced
set xlabel 'ranks' noenhanced
set ylabel 'peak RSS of the largest rank (MiB)' noenhanced
set grid
set key outside right top noenhanced
set xtics (1, 2, 4)
set xrange [0.75:4.25]
set yrange [0:*]
set format x '%.12g'
set format y '%.12g'
set table 'bench/results/sweep_tiny/peak_memory.points.txt'
plot 'bench/results/sweep_tiny/peak_memory.dat' index 0 using 1:2 with linespoints lw 2 pt 7 title 'stage 0', '' index 1 using 1:2 with linespoints lw 2 pt 7 title 'stage 1', '' index 2 using 1:2 with linespoints lw 2 pt 7 title 'stage 2', '' index 3 using 1:2 with linespoints lw 2 pt 7 title 'stage 3'
unset table
set format x '%g'
set format y '%g'
set terminal pngcairo size 1000,600 noenhanced
set output 'bench/results/sweep_tiny/peak_memory.png'
replot
unset output
